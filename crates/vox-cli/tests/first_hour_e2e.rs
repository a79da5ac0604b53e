//! End to end, with the real binaries: what a new user meets in their first hour (`vox check` in
//! CI, mistyped paths, `vox doctor`, client configuration, completions, the config file, the
//! bundled skills, `.vox/.gitignore`).

mod common;
use common::*;
use serde_json::{Value, json};
use std::path::Path;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .unwrap()
}

#[test]
fn check_without_paths_checks_the_current_directory() {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.root().join("tools")).unwrap();
    std::fs::write(ws.root().join("tools/ok.vox"), "fn one() to int { 1 }\n").unwrap();
    let out = ws.vox(&["check"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("checked 1 file(s): 0 error(s)"),
        "{}",
        stdout(&out)
    );
    // A CI step `vox check` fails on an error anywhere below the current directory.
    std::fs::write(ws.root().join("tools/bad.vox"), "fn f( {\n").unwrap();
    let out = ws.vox(&["check"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("bad.vox"), "{}", stdout(&out));
}

#[test]
fn a_missing_path_is_named_and_fails_check_test_and_fmt() {
    let ws = Ws::new();
    for cmd in ["check", "test", "fmt"] {
        let out = ws.vox(&[cmd, "missing/"]);
        assert_eq!(out.status.code(), Some(1), "vox {cmd}: {}", stdout(&out));
        assert!(
            stderr(&out).contains("cannot read missing/: no such file or directory"),
            "vox {cmd}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn profile_show_names_its_argument_as_the_source_of_an_unknown_id() {
    let ws = Ws::new();
    let out = ws.vox(&["profile", "show", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("profile_unknown: unknown profile `nope`"),
        "{err}"
    );
    assert!(!err.contains("--profile"), "{err}");
    assert!(err.contains("argument of `vox profile show`"), "{err}");
}

#[test]
fn the_daemon_binary_names_itself_in_version_and_help() {
    let out = std::process::Command::new(DAEMON)
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        stdout(&out).trim(),
        format!("vox-orchestrator-d {}", env!("CARGO_PKG_VERSION"))
    );
    let out = std::process::Command::new(DAEMON)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = stdout(&out);
    assert!(help.contains("Usage: vox-orchestrator-d"), "{help}");
    assert!(
        help.contains("--workspace") && help.contains("--profile"),
        "{help}"
    );
}

#[test]
fn bundled_skills_of_this_repository_are_listed_without_vox_skill_path() {
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(VOX)
        .args(["skill", "list", "--json"])
        .current_dir(repo_root())
        .env("VOX_HOME", home.path())
        .env_remove("VOX_SKILL_PATH")
        .env_remove("VOX_WORKSPACE")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut bundled: Vec<String> = std::fs::read_dir(repo_root().join("skills"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("SKILL.md").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    bundled.sort();
    assert!(!bundled.is_empty());
    let listed: Vec<&str> = v["skills"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["origin"] == "project")
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, bundled);
    assert_eq!(v["errors"], json!([]));
}

#[tokio::test]
async fn the_daemon_serves_the_same_skill_catalog_as_vox_skill_list() {
    let ws = Ws::new();
    for e in std::fs::read_dir(repo_root().join("skills"))
        .unwrap()
        .flatten()
    {
        if !e.path().join("SKILL.md").is_file() {
            continue;
        }
        let dst = ws.root().join("skills").join(e.file_name());
        std::fs::create_dir_all(&dst).unwrap();
        std::fs::copy(e.path().join("SKILL.md"), dst.join("SKILL.md")).unwrap();
    }
    std::fs::create_dir_all(ws.root().join("skills/not-a-skill")).unwrap();
    let out = ws.vox(&["skill", "list", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids = |list: &Value| -> Vec<(String, String)> {
        list["skills"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["id"].as_str().unwrap().to_owned(),
                    s["origin"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let c = ws.client(&["--profile", "skills"]).await;
    let served = ok(&c, "vox_skill_list", json!({})).await;
    assert_eq!(ids(&served), ids(&cli));
    assert!(ids(&cli).iter().all(|(_, o)| o == "project"));
    assert_eq!(ids(&cli).len(), 3, "{cli}");
    assert_eq!(served["errors"], json!([]));
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn a_new_vox_directory_gets_a_gitignore_and_an_existing_one_is_kept() {
    let ws = Ws::new();
    let c = ws.client(&["--profile", "knowledge"]).await;
    c.cancel().await.unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.vox_dir().join(".gitignore")).unwrap(),
        "*\n"
    );
    ws.stop_daemon();
    let ws2 = Ws::new();
    std::fs::create_dir_all(ws2.vox_dir()).unwrap();
    std::fs::write(ws2.vox_dir().join(".gitignore"), "journey.db\n").unwrap();
    let c = ws2.client(&["--profile", "knowledge"]).await;
    c.cancel().await.unwrap();
    assert_eq!(
        std::fs::read_to_string(ws2.vox_dir().join(".gitignore")).unwrap(),
        "journey.db\n"
    );
}

#[test]
fn an_unknown_config_key_is_an_error_naming_file_line_and_key() {
    let ws = Ws::new();
    let config = ws.home.path().join("config.toml");
    std::fs::write(&config, "VOX_PROFIL = \"knowledge\"\n").unwrap();
    let expected = format!(
        "{}:1: unknown key VOX_PROFIL (known: VOX_PROFILE)",
        config.display()
    );
    for args in [
        &["mcp"][..],
        &["mcp", "--profile", "knowledge"],
        &["daemon", "start"],
    ] {
        let out = ws.vox(args);
        assert!(!out.status.success(), "vox {args:?}");
        assert!(
            stderr(&out).contains(&expected),
            "vox {args:?}: {}",
            stderr(&out)
        );
    }
    let out = ws.vox(&["bundle", "apply", "vox-edge"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains(&expected), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "VOX_PROFIL = \"knowledge\"\n",
        "a refused file is left alone"
    );
    std::fs::write(&config, "# mine\nVOX_PROFILE = 7\n").unwrap();
    let out = ws.vox(&["mcp"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(&format!(
            "{}:2: VOX_PROFILE: invalid type: integer `7`, expected a string",
            config.display()
        )),
        "{}",
        stderr(&out)
    );
    // `vox bundle apply` still merges: the comment stays, the value changes.
    std::fs::write(&config, "# mine\nVOX_PROFILE = \"dev\"\n").unwrap();
    let out = ws.vox(&["bundle", "apply", "vox-edge"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "# mine\nVOX_PROFILE = \"lang,skills\"\n"
    );
}

/// `vox client config` in `ws` with CODEX_HOME inside the test's home.
fn client_config(ws: &Ws, args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(VOX);
    cmd.args(["client", "config"])
        .args(args)
        .current_dir(ws.root())
        .env("VOX_HOME", ws.home.path())
        .env("HOME", ws.home.path())
        .env("CODEX_HOME", ws.home.path().join("codex"))
        .env_remove("VOX_WORKSPACE")
        .env_remove("VOX_PROFILE");
    cmd.output().unwrap()
}

fn root_of(ws: &Ws) -> String {
    ws.root().canonicalize().unwrap().display().to_string()
}

#[test]
fn client_config_prints_each_clients_own_format() {
    let ws = Ws::new();
    let root = root_of(&ws);
    let vox = Path::new(VOX).canonicalize().unwrap().display().to_string();
    let args = json!(["mcp", "--profile", "knowledge", "--workspace", root]);
    for (client, key) in [("claude-code", "mcpServers"), ("cursor", "mcpServers")] {
        let out = client_config(&ws, &["--client", client, "--profile", "knowledge"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            v,
            json!({key: {"vox-knowledge": {"command": vox, "args": args}}}),
            "{client}"
        );
    }
    let out = client_config(&ws, &["--client", "vscode", "--profile", "knowledge"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v,
        json!({"servers": {"vox-knowledge": {"type": "stdio", "command": vox, "args": args}}})
    );
    let out = client_config(&ws, &["--client", "codex"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let t: toml::Table = stdout(&out).parse().unwrap();
    let entry = t["mcp_servers"]["vox"].as_table().unwrap();
    assert_eq!(entry["command"].as_str(), Some(vox.as_str()));
    assert_eq!(
        entry["args"],
        toml::Value::Array(
            ["mcp", "--workspace", root.as_str()]
                .map(|a| toml::Value::String(a.into()))
                .to_vec()
        )
    );
    // Nothing is written without --write; the target is named on stderr.
    assert!(!ws.root().join(".mcp.json").exists());
    assert!(
        stderr(&out).contains("codex/config.toml"),
        "{}",
        stderr(&out)
    );
    let out = client_config(&ws, &["--client", "codex", "--profile", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("profile_unknown"));
}

#[test]
fn client_config_write_merges_into_existing_files_and_keeps_other_entries() {
    let ws = Ws::new();
    let root = root_of(&ws);
    // Claude Code: another server and a top-level key survive; a stale vox entry is replaced.
    std::fs::write(
        ws.root().join(".mcp.json"),
        r#"{"mcpServers": {"other": {"command": "other-mcp", "args": ["-v"]}, "vox": {"command": "stale"}}, "extra": true}"#,
    )
    .unwrap();
    let out = client_config(&ws, &["--client", "claude-code", "--write"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), format!("{root}/.mcp.json"));
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(ws.root().join(".mcp.json")).unwrap())
            .unwrap();
    assert_eq!(v["extra"], true);
    assert_eq!(
        v["mcpServers"]["other"],
        json!({"command": "other-mcp", "args": ["-v"]})
    );
    assert_eq!(
        v["mcpServers"]["vox"]["args"],
        json!(["mcp", "--workspace", root])
    );
    // Two profiles sit side by side.
    let out = client_config(
        &ws,
        &[
            "--client",
            "claude-code",
            "--write",
            "--profile",
            "repo-read",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(ws.root().join(".mcp.json")).unwrap())
            .unwrap();
    let names: Vec<&String> = v["mcpServers"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["other", "vox", "vox-repo-read"]);

    // Cursor and VS Code: the file and its directory are created.
    for (client, file, key) in [
        ("cursor", ".cursor/mcp.json", "mcpServers"),
        ("vscode", ".vscode/mcp.json", "servers"),
    ] {
        let out = client_config(&ws, &["--client", client, "--write"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(ws.root().join(file)).unwrap()).unwrap();
        assert!(v[key]["vox"]["command"].is_string(), "{client}: {v}");
    }
    std::fs::write(
        ws.root().join(".vscode/mcp.json"),
        "{\"inputs\": [{\"id\": \"k\"}], \"servers\": {\"gh\": {\"type\": \"http\", \"url\": \"https://example.invalid/mcp\"}}}",
    )
    .unwrap();
    let out = client_config(&ws, &["--client", "vscode", "--write"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(ws.root().join(".vscode/mcp.json")).unwrap())
            .unwrap();
    assert_eq!(v["inputs"], json!([{"id": "k"}]));
    assert_eq!(v["servers"]["gh"]["type"], "http");
    assert_eq!(v["servers"]["vox"]["type"], "stdio");
    // A file vox cannot parse is refused and left as it was.
    std::fs::write(ws.root().join(".cursor/mcp.json"), "{ // comment\n}").unwrap();
    let out = client_config(&ws, &["--client", "cursor", "--write"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("not valid JSON"), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(ws.root().join(".cursor/mcp.json")).unwrap(),
        "{ // comment\n}"
    );

    // Codex: CODEX_HOME's config.toml keeps its other keys, tables and comments.
    let codex = ws.home.path().join("codex/config.toml");
    std::fs::create_dir_all(codex.parent().unwrap()).unwrap();
    std::fs::write(
        &codex,
        "# my settings\nmodel = \"o3\"\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\n",
    )
    .unwrap();
    let out = client_config(
        &ws,
        &["--client", "codex", "--write", "--profile", "knowledge"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), codex.display().to_string());
    let text = std::fs::read_to_string(&codex).unwrap();
    assert!(
        text.starts_with("# my settings\nmodel = \"o3\"\n"),
        "{text}"
    );
    let t: toml::Table = text.parse().unwrap();
    assert_eq!(t["model"].as_str(), Some("o3"));
    assert_eq!(
        t["mcp_servers"]["docs"]["command"].as_str(),
        Some("docs-mcp")
    );
    assert_eq!(
        t["mcp_servers"]["vox-knowledge"]["args"][2].as_str(),
        Some("knowledge")
    );
    // Writing again replaces the entry rather than adding a second one.
    let out = client_config(
        &ws,
        &["--client", "codex", "--write", "--profile", "knowledge"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let again = std::fs::read_to_string(&codex).unwrap();
    assert_eq!(again, text);
}

#[test]
fn completions_for_bash_mention_the_subcommands() {
    let ws = Ws::new();
    let out = ws.vox(&["completions", "bash"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let script = stdout(&out);
    for sub in [
        "mcp",
        "check",
        "doctor",
        "client",
        "completions",
        "profile",
        "skill",
    ] {
        assert!(
            script.contains(sub),
            "{sub} missing from the bash completions"
        );
    }
    for shell in ["zsh", "fish", "powershell", "elvish"] {
        let out = ws.vox(&["completions", shell]);
        assert!(out.status.success() && !out.stdout.is_empty(), "{shell}");
    }
}

fn doctor(ws: &Ws) -> (Option<i32>, Value) {
    let out = ws.vox(&["doctor", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {}", stdout(&out), stderr(&out)));
    (out.status.code(), v)
}

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} check in {report}"))
}

#[test]
fn doctor_in_a_fresh_workspace_passes_and_creates_nothing() {
    let ws = Ws::new();
    let (code, report) = doctor(&ws);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["fail"], 0, "{report}");
    for name in [
        "vox",
        "vox-orchestrator-d",
        "profile",
        "workspace",
        "daemon",
        "log",
        "store",
    ] {
        assert_eq!(check(&report, name)["status"], "ok", "{name}: {report}");
    }
    assert!(
        check(&report, "vox-orchestrator-d")["details"]["path"]
            .as_str()
            .unwrap()
            .ends_with("vox-orchestrator-d")
    );
    assert_eq!(check(&report, "profile")["details"]["profile"], "dev");
    assert_eq!(check(&report, "profile")["details"]["source"], "default");
    assert_eq!(
        check(&report, "workspace")["details"]["found_by"],
        "from VOX_WORKSPACE"
    );
    assert!(
        check(&report, "daemon")["message"]
            .as_str()
            .unwrap()
            .contains("not running")
    );
    assert!(!ws.vox_dir().exists(), "doctor is read-only");
    let out = ws.vox(&["doctor"]);
    assert!(
        stdout(&out).lines().any(|l| l.starts_with("ok    daemon")),
        "{}",
        stdout(&out)
    );
}

#[tokio::test]
async fn doctor_reports_the_running_daemon_and_the_store() {
    let ws = Ws::new().with_env("VOX_PROFILE", "knowledge");
    let c = ws.client(&[]).await;
    let pid = ws.daemon_status()["ping"]["pid"].as_u64().unwrap();
    let (code, report) = doctor(&ws);
    assert_eq!(code, Some(0), "{report}");
    let d = check(&report, "daemon");
    assert_eq!(d["status"], "ok", "{report}");
    assert_eq!(d["details"]["ping"]["pid"].as_u64(), Some(pid));
    assert_eq!(d["details"]["ping"]["profile"], "knowledge");
    let s = check(&report, "store");
    assert_eq!(s["status"], "ok", "{report}");
    assert!(s["details"]["schema_version"].as_i64().unwrap() >= 1);
    assert_eq!(check(&report, ".vox/.gitignore")["status"], "ok");
    c.cancel().await.unwrap();
}

#[test]
fn doctor_fails_on_a_broken_config_and_a_broken_store() {
    let ws = Ws::new();
    let config = ws.home.path().join("config.toml");
    std::fs::write(&config, "VOX_PROFIL = \"knowledge\"\n").unwrap();
    let (code, report) = doctor(&ws);
    assert_eq!(code, Some(1));
    let p = check(&report, "profile");
    assert_eq!(p["status"], "fail");
    assert!(
        p["message"]
            .as_str()
            .unwrap()
            .contains("config.toml:1: unknown key VOX_PROFIL (known: VOX_PROFILE)"),
        "{report}"
    );
    std::fs::remove_file(&config).unwrap();
    std::fs::create_dir_all(ws.vox_dir()).unwrap();
    std::fs::write(ws.vox_dir().join("journey.db"), vec![b'x'; 4096]).unwrap();
    let (code, report) = doctor(&ws);
    assert_eq!(code, Some(1));
    assert_eq!(check(&report, "store")["status"], "fail", "{report}");
    assert_eq!(check(&report, "profile")["status"], "ok");
    // A .vox/ that predates the .gitignore is pointed out.
    assert_eq!(check(&report, ".vox/.gitignore")["status"], "warn");
    let out = ws.vox(&["doctor"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).lines().any(|l| l.starts_with("fail  store")),
        "{}",
        stdout(&out)
    );
}

#[test]
fn codex_serves_the_tools_of_the_server_vox_client_config_wrote() {
    let Some(codex_js) = codex_js() else {
        return;
    };
    let ws = Ws::new();
    git(ws.root(), &["init", "-q"]);
    let out = client_config(
        &ws,
        &["--client", "codex", "--profile", "knowledge", "--write"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let codex_home = ws.home.path().join("codex");
    let mut app = AppServer::start(
        &codex_js,
        &codex_home,
        ws.root(),
        &[("VOX_HOME", ws.home.path())],
    );
    let server = app.mcp_server("vox-knowledge");
    let mut tools: Vec<String> = server["tools"]
        .as_object()
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default();
    tools.sort();
    let mut expected = registry_slice("knowledge");
    expected.sort();
    assert_eq!(tools, expected, "{server}");
}

#[test]
fn doctor_fails_on_an_unreachable_database_and_the_daemons_failed_subsystems() {
    let ws = Ws::new().with_env("VOX_DB_URL", "postgres://vox:secret@127.0.0.1:1/nowhere");
    // Nothing running: the database itself is checked.
    let (code, report) = doctor(&ws);
    assert_eq!(code, Some(1), "{report}");
    let store = check(&report, "store");
    assert_eq!(store["status"], "fail", "{report}");
    let message = store["message"].as_str().unwrap();
    assert!(
        message.contains("VOX_DB_URL") && message.contains("127.0.0.1:1"),
        "{message}"
    );
    assert!(
        !message.contains("secret"),
        "the password is never shown: {message}"
    );
    // A daemon that booted without it: its failed subsystems fail the doctor too.
    let out = ws.vox(&["daemon", "start", "--profile", "knowledge"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (code, report) = doctor(&ws);
    assert_eq!(code, Some(1));
    let subsystems = check(&report, "subsystems");
    assert_eq!(subsystems["status"], "fail", "{report}");
    assert!(
        subsystems["message"].as_str().unwrap().contains("db:"),
        "{subsystems}"
    );
    ws.stop_daemon();
}

#[test]
fn client_config_write_names_a_rival_entry_for_the_workspace_and_replace_removes_it() {
    let ws = Ws::new();
    let out = client_config(
        &ws,
        &[
            "--client",
            "claude-code",
            "--profile",
            "knowledge",
            "--write",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = client_config(
        &ws,
        &[
            "--client",
            "claude-code",
            "--profile",
            "repo-read",
            "--write",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let warned = stderr(&out);
    assert!(
        warned.contains("vox-knowledge") && warned.contains("profile_mismatch"),
        "{warned}"
    );
    let file = ws.root().join(".mcp.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(v["mcpServers"].as_object().unwrap().len(), 2);
    let out = client_config(
        &ws,
        &[
            "--client",
            "claude-code",
            "--profile",
            "repo-read",
            "--write",
            "--replace",
            "--workspace-tools",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("removed"), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let servers = v["mcpServers"].as_object().unwrap();
    assert_eq!(servers.keys().collect::<Vec<_>>(), ["vox-repo-read"]);
    assert_eq!(
        servers["vox-repo-read"]["env"]["VOX_MCP_WORKSPACE_TOOLS"],
        "1"
    );
    // Flags that do not go together are refused by name.
    let out = client_config(&ws, &["--client", "codex", "--url", "ftp://x", "--write"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--url"), "{}", stderr(&out));
    let out = client_config(&ws, &["--client", "codex", "--token-env", "T"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn codex_reaches_a_vox_serve_through_the_http_entry_vox_client_config_wrote() {
    let Some(codex_js) = codex_js() else {
        return;
    };
    let s = common::gateway::Server::tokens(Ws::new(), "knowledge");
    let url = format!("http://{}/mcp", s.addr);
    let out = client_config(
        &s.ws,
        &[
            "--client",
            "codex",
            "--url",
            &url,
            "--token-env",
            "VOX_TEST_HTTP_TOKEN",
            "--write",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let codex_home = s.ws.home.path().join("codex");
    let written = std::fs::read_to_string(codex_home.join("config.toml")).unwrap();
    assert!(
        !written.contains(common::gateway::WRITE),
        "the token is never written: {written}"
    );
    let mut app = AppServer::start(
        &codex_js,
        &codex_home,
        s.ws.root(),
        &[("VOX_TEST_HTTP_TOKEN", Path::new(common::gateway::WRITE))],
    );
    let server = app.mcp_server("vox-http");
    assert!(
        server["tools"].get("vox_memory_recall").is_some(),
        "{server}"
    );
}
