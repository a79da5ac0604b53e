//! Generated Codex homes checked by the real Codex app-server: `initialize`, then `config/read`,
//! and the effective configuration must say what the home was generated to say. The homes are
//! materialized into live directories the way the runtime will (`mmo_profile::snapshot`).
//!
//! Needs the real binary: `npm install --prefix <dir> @openai/codex@0.169.0` and
//! `CODEX_MMO_CODEX_JS=<dir>/node_modules/@openai/codex/bin/codex.js` (`.ci/run` does both).
//! A variable naming a missing file fails the test; so does an unset variable under CI
//! (`CI` set). Unset on a developer's machine, the test writes a notice to the terminal and
//! checks nothing.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_codex-mmo");

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            // Snapshot files are read-only; a Codex home must be writable for Codex's own state.
            std::fs::write(&dest, std::fs::read(e.path()).unwrap()).unwrap();
        }
    }
}

fn config_read(codex_js: &str, home: &Path) -> Value {
    let mut child = Command::new("node")
        .args([codex_js, "app-server"])
        .env("CODEX_HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `node {codex_js} app-server`: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && tx.send(v).is_err()
            {
                break;
            }
        }
    });
    let mut send = |v: Value| writeln!(stdin, "{v}").unwrap();
    let wait = |id: i64| loop {
        let v = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("app-server answers within 60 s");
        if v["id"] == id {
            return v;
        }
    };
    send(
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"codex-mmo-test","version":"0"}}}),
    );
    wait(1);
    send(json!({"jsonrpc":"2.0","method":"initialized"}));
    send(json!({"jsonrpc":"2.0","id":2,"method":"config/read","params":{}}));
    let answer = wait(2);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        answer.get("error").is_none(),
        "config/read failed: {answer}"
    );
    answer["result"]["config"].clone()
}

const CODEX_JS_VAR: &str = "CODEX_MMO_CODEX_JS";

/// Where the real `codex.js` is, or `None` (after a notice) on a developer's machine without it.
/// Panics, with the reason, when CI lacks it or the variable names no file.
fn codex_js() -> Option<String> {
    let Some(path) = std::env::var_os(CODEX_JS_VAR).filter(|v| !v.is_empty()) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{CODEX_JS_VAR} is unset under CI: .ci/run must install @openai/codex@0.169.0 \
             and export {CODEX_JS_VAR}, or this check would silently pass"
        );
        // Written past the test harness's output capture so that `cargo test` shows it.
        let _ = writeln!(
            std::io::stderr().lock(),
            "NOTICE: codex_app_server did not run: set {CODEX_JS_VAR} to \
             <dir>/node_modules/@openai/codex/bin/codex.js \
             (npm install --prefix <dir> @openai/codex@0.169.0)"
        );
        return None;
    };
    let path = PathBuf::from(path);
    assert!(
        path.is_file(),
        "{CODEX_JS_VAR}={} is not a file; install it with \
         `npm install --prefix <dir> @openai/codex@0.169.0` and point the variable at \
         <dir>/node_modules/@openai/codex/bin/codex.js",
        path.display()
    );
    Some(path.to_string_lossy().into_owned())
}

#[test]
fn generated_codex_homes_are_read_back_by_the_real_app_server() {
    let Some(codex_js) = codex_js() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    copy_dir(
        &crate_dir.join("operator/tool-mcp.d"),
        &tmp.path().join("config/codex-mmo/tool-mcp.d"),
    );
    let compile = |pack: &str, extra: &[&str]| {
        let dir = if Path::new(pack).is_absolute() {
            PathBuf::from(pack)
        } else {
            crate_dir.join("../../profiles").join(pack)
        };
        let o = Command::new(BIN)
            .args(["profile", "compile", dir.to_str().unwrap()])
            .args(extra)
            .env("XDG_DATA_HOME", tmp.path().join("data"))
            .env("XDG_CONFIG_HOME", tmp.path().join("config"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        tmp.path()
            .join("data/codex-mmo/snapshots")
            .join(String::from_utf8(o.stdout).unwrap().trim())
    };
    let live = |snapshot: &Path, name: &str| {
        mmo_profile::snapshot::materialize(snapshot, &tmp.path().join(name))
            .unwrap_or_else(|e| panic!("{e}"))
            .homes
    };
    let squad = live(&compile("build-squad", &[]), "live-squad");
    let c = config_read(&codex_js, &squad["researcher"]);
    assert_eq!(c["model"], "claude-sonnet-5");
    assert_eq!(c["model_provider"], "opencode_zen_anthropic_messages");
    assert_eq!(c["approval_policy"], "never");
    assert_eq!(c["sandbox_mode"], "read-only");
    assert_eq!(c["web_search"], "cached");
    assert_eq!(c["model_reasoning_effort"], "medium");
    assert_eq!(
        c["mcp_servers"]["firecrawl"]["enabled_tools"],
        json!(["search", "fetch"])
    );
    assert_eq!(c["mcp_servers"]["firecrawl"]["required"], true);
    // Under approval_policy "never" a granted tool must be callable: Codex refuses MCP calls
    // that need approval when nothing may ask for it.
    assert_eq!(
        c["mcp_servers"]["firecrawl"]["default_tools_approval_mode"],
        "approve"
    );
    assert_eq!(
        c["model_providers"]["opencode_zen_anthropic_messages"]["env_key"],
        "OPENCODE_ZEN_API_KEY"
    );
    assert_eq!(
        c["skills"]["config"][0]["enabled"], false,
        "leaf homes disable the skill"
    );

    let c = config_read(&codex_js, &squad["lead"]);
    assert_eq!(c["sandbox_mode"], "workspace-write");
    assert_eq!(c["sandbox_workspace_write"]["network_access"], false);
    assert_eq!(c["plan_mode_reasoning_effort"], "xhigh");
    assert_eq!(c["skills"]["config"][0]["enabled"], true);

    let audit = live(&compile("hybrid-audit", &[]), "live-audit");
    let c = config_read(&codex_js, &audit["auditor_lead"]);
    assert_eq!(c["approval_policy"], "on-request");
    assert_eq!(c["agents"]["max_concurrent_threads_per_session"], 3);
    assert_eq!(c["agents"]["max_depth"], 1);
    assert_eq!(c["agents"]["interrupt_message"], true);

    // A native role on a gateway route: the root's home defines the provider its agent file
    // selects (Codex keeps the caller's provider for a native agent unless the file names one).
    let pack = tmp.path().join("hybrid-gateway");
    copy_dir(&crate_dir.join("../../profiles/hybrid-audit"), &pack);
    let mut catalog = std::fs::read_to_string(pack.join("catalog.toml")).unwrap();
    catalog.push_str(
        "\n[routes.lab_gateway_chat]\nnamespace = \"lab\"\ndriver = \"openai_chat\"\ntransports = [\"responses\"]\ninput_modalities = [\"text\"]\noutput_modalities = [\"text\"]\nbackends = [\"mcp\", \"native\"]\nresource_group = \"opencode_go\"\nbase_url = \"http://127.0.0.1:4318/switchyard/lab_gateway_chat/v1\"\ncredential_env = \"LAB_GATEWAY_API_KEY\"\n\n[models.lab_gateway_chat__coder]\nname = \"lab-coder\"\nagent_compatible = true\ntool_calling = true\nreasoning = [\"medium\"]\ninput_modalities = [\"text\"]\noutput_modalities = [\"text\"]\n",
    );
    std::fs::write(pack.join("catalog.toml"), catalog).unwrap();
    std::fs::write(
        tmp.path().join("config/codex-mmo/credentials.toml"),
        "[[allow]]\ncredential_env = \"LAB_GATEWAY_API_KEY\"\norigin = \"http://127.0.0.1:4318\"\n",
    )
    .unwrap();
    let gateway = live(
        &compile(
            pack.to_str().unwrap(),
            &["--bind", "scout=lab_gateway_chat__coder"],
        ),
        "live-gateway",
    );
    let root = &gateway["auditor_lead"];
    let c = config_read(&codex_js, root);
    assert_eq!(c["model_provider"], "openai");
    assert_eq!(
        c["model_providers"]["lab_gateway_chat"]["base_url"],
        "http://127.0.0.1:4318/switchyard/lab_gateway_chat/v1"
    );
    assert_eq!(
        c["model_providers"]["lab_gateway_chat"]["env_key"],
        "LAB_GATEWAY_API_KEY"
    );
    let agent = std::fs::read_to_string(root.join("agents/audit-scout.toml")).unwrap();
    assert!(
        agent.contains("model_provider = \"lab_gateway_chat\""),
        "{agent}"
    );
}
