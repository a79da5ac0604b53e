//! Shared harness of the runtime's end-to-end tests: temporary data/config/workspace
//! directories, a scripted model process speaking the Responses API, generated packs whose
//! routes point at it, the `codex-mmo` binary, and a stdio MCP client for `agent-mcp`.
#![allow(dead_code)]

pub mod review;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The real Codex, or `None` (with a notice) when this machine has none. Under CI a missing
/// Codex fails the test.
pub fn codex_js() -> Option<PathBuf> {
    match std::env::var_os("CODEX_MMO_CODEX_JS") {
        Some(p) => {
            let p = PathBuf::from(p);
            assert!(
                p.is_file(),
                "CODEX_MMO_CODEX_JS names a missing file: {}",
                p.display()
            );
            Some(p)
        }
        None => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CODEX_MMO_CODEX_JS is not set under CI"
            );
            let mut tty = std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/tty")
                .ok();
            let msg = "NOTICE: the runtime's end-to-end tests did not run: set CODEX_MMO_CODEX_JS to @openai/codex@0.169.0's bin/codex.js\n";
            if let Some(t) = tty.as_mut() {
                let _ = t.write_all(msg.as_bytes());
            }
            eprint!("{msg}");
            None
        }
    }
}

/// A binary of this workspace's target directory.
pub fn workspace_bin(name: &str) -> PathBuf {
    let me = PathBuf::from(env!("CARGO_BIN_EXE_codex-mmo"));
    let p = me.parent().unwrap().join(name);
    assert!(
        p.is_file(),
        "{} is not built (cargo build --workspace builds it)",
        p.display()
    );
    p
}

/// One test's world.
pub struct World {
    pub root: tempfile::TempDir,
    pub codex_js: PathBuf,
    pub model: Option<Child>,
    pub port: u16,
    pub model_log: PathBuf,
}

impl World {
    pub fn new(codex_js: PathBuf) -> World {
        let root = tempfile::tempdir().unwrap();
        for d in ["data", "config/codex-mmo/tool-mcp.d", "packs", "ws"] {
            std::fs::create_dir_all(root.path().join(d)).unwrap();
        }
        // The model's port is chosen first, so packs (and scripts that need a session id) can
        // be written before the model starts.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // The scripted catalog's route sends MMO_TEST_KEY to the model: the operator's consent.
        std::fs::write(
            root.path().join("config/codex-mmo/credentials.toml"),
            format!(
                "[[allow]]\ncredential_env = \"MMO_TEST_KEY\"\norigin = \"http://127.0.0.1:{port}\"\n"
            ),
        )
        .unwrap();
        World {
            model_log: root.path().join("model.jsonl"),
            root,
            codex_js,
            model: None,
            port,
        }
    }

    pub fn data(&self) -> PathBuf {
        self.root.path().join("data")
    }

    pub fn ws(&self) -> PathBuf {
        self.root.path().join("ws")
    }

    /// Makes the workspace a git repository with these files committed.
    pub fn git_workspace(&self, files: &[(&str, &str)]) {
        let ws = self.ws();
        for (p, text) in files {
            let f = ws.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, text).unwrap();
        }
        for args in [
            vec!["init", "-q", "-b", "main"],
            vec!["-c", "user.name=t", "-c", "user.email=t@e", "add", "-A"],
            vec![
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@e",
                "commit",
                "-qm",
                "base",
            ],
        ] {
            let o = Command::new("git")
                .args(&args)
                .current_dir(&ws)
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "git {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    }

    /// Starts the scripted model with this script.
    pub fn start_model(&mut self, script: &Value) {
        let script_path = self.root.path().join("script.json");
        std::fs::write(&script_path, serde_json::to_vec_pretty(script).unwrap()).unwrap();
        let port_file = self.root.path().join("model.port");
        let child = Command::new(workspace_bin("scripted-model"))
            .arg("--script")
            .arg(&script_path)
            .arg("--port")
            .arg(self.port.to_string())
            .arg("--port-file")
            .arg(&port_file)
            .arg("--log")
            .arg(&self.model_log)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        self.model = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if std::fs::read_to_string(&port_file).is_ok_and(|t| t.trim() == self.port.to_string())
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the scripted model did not report its port"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The model requests logged so far.
    pub fn model_requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.model_log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Writes a pack: `profile` is the profile.toml text; `catalog.toml` gets a route to the
    /// scripted model; `files` are extra members (agents/*.md, contracts/*.json).
    pub fn pack(&self, id: &str, profile: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = self.root.path().join("packs").join(id);
        std::fs::create_dir_all(dir.join("agents")).unwrap();
        std::fs::create_dir_all(dir.join("contracts")).unwrap();
        std::fs::write(dir.join("profile.toml"), profile).unwrap();
        std::fs::write(dir.join("catalog.toml"), scripted_catalog(self.port)).unwrap();
        for (p, text) in files {
            std::fs::write(dir.join(p), text).unwrap();
        }
        dir
    }

    /// `codex-mmo` with this world's directories.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_codex-mmo"));
        c.env_remove("XDG_DATA_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .env("CODEX_MMO_DATA_DIR", self.data())
            .env(
                "CODEX_MMO_CONFIG_DIR",
                self.root.path().join("config/codex-mmo"),
            )
            .env("CODEX_MMO_CODEX_JS", &self.codex_js)
            .env("MMO_TEST_KEY", "test-key")
            .current_dir(self.ws());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// `codex-mmo run --detach` of a pack; returns the session id.
    pub fn start_session(&self, pack: &Path, task: Option<&str>) -> String {
        let mut args = vec!["run", "--profile", pack.to_str().unwrap(), "--detach"];
        if let Some(t) = task {
            args.push("--task");
            args.push(t);
        }
        let o = self.run(&args);
        assert!(
            o.status.success(),
            "run: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    }

    /// `inspect --json`.
    pub fn inspect(&self, session: &str) -> Value {
        let o = self.run(&["inspect", session, "--json"]);
        assert!(
            o.status.success(),
            "inspect: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_slice(&o.stdout).unwrap()
    }

    /// Waits until the session's state is one of `states`.
    pub fn wait_state(&self, session: &str, states: &[&str], timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.inspect(session);
            if states.contains(&v["state"].as_str().unwrap_or("")) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "session {session} did not reach {states:?}: {v:#}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The operator's MCP client (`codex-mmo agent-mcp --session`).
    pub fn operator(&self, session: &str) -> Mcp {
        let mut c = self.cmd();
        c.args(["agent-mcp", "--session", session]);
        Mcp::start(c)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // Stop every session of this world, then the model.
        if let Ok(o) = self.cmd().args(["sessions", "--json"]).output()
            && let Ok(v) = serde_json::from_slice::<Value>(&o.stdout)
        {
            for s in v["sessions"].as_array().into_iter().flatten() {
                let st = s["state"].as_str().unwrap_or("");
                if !matches!(st, "stopped" | "completed" | "failed") {
                    let _ = self
                        .cmd()
                        .args(["stop", s["id"].as_str().unwrap_or("")])
                        .output();
                }
            }
        }
        if let Some(mut m) = self.model.take() {
            let _ = m.kill();
            let _ = m.wait();
        }
    }
}

/// A catalog overlay with one route to the scripted model and two models on it.
pub fn scripted_catalog(port: u16) -> String {
    format!(
        r#"schema_version = 8

[resource_groups.scripted]
capacity = 16
description = "The scripted model process of a test"

[resource_groups.scripted_literal]
capacity = 1
description = "A single-slot lane for low-trust literal workers"

[routes.scripted_responses]
namespace = "scripted"
driver = "openai_responses"
transports = ["responses"]
input_modalities = ["text"]
output_modalities = ["text"]
backends = ["mcp", "native"]
resource_group = "scripted"
base_url = "http://127.0.0.1:{port}/v1"
credential_env = "MMO_TEST_KEY"

[models.scripted_responses__scripted_large]
name = "scripted-large"
agent_compatible = true
tool_calling = true
reasoning = ["none", "low", "medium", "high"]
input_modalities = ["text"]
output_modalities = ["text"]
structured_output = true

[models.scripted_responses__scripted_literal]
name = "scripted-literal"
agent_compatible = true
tool_calling = true
reasoning = ["none"]
input_modalities = ["text"]
output_modalities = ["text"]
structured_output = true
resource_group = "scripted_literal"

[models.scripted_responses__scripted_plain]
name = "scripted-plain"
agent_compatible = true
tool_calling = true
reasoning = ["none", "low", "medium", "high"]
input_modalities = ["text"]
output_modalities = ["text"]
structured_output = false
"#
    )
}

/// A minimal stdio MCP client.
pub struct Mcp {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: i64,
}

impl Mcp {
    pub fn start(mut c: Command) -> Mcp {
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut m = Mcp {
            child,
            stdin,
            stdout,
            next: 1,
        };
        let init = m.request("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}));
        assert!(init.get("result").is_some(), "initialize: {init}");
        writeln!(
            m.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        .unwrap();
        m
    }

    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        writeln!(
            self.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        )
        .unwrap();
        self.stdin.flush().unwrap();
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "the MCP server closed its output");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == json!(id) {
                return v;
            }
        }
    }

    /// `tools/call`: the structured content, and whether it is an error.
    pub fn call(&mut self, tool: &str, args: Value) -> (Value, bool) {
        let v = self.request("tools/call", json!({"name": tool, "arguments": args}));
        let r = &v["result"];
        (
            r["structuredContent"].clone(),
            r["isError"].as_bool().unwrap_or(true),
        )
    }

    /// A call that must succeed.
    pub fn ok(&mut self, tool: &str, args: Value) -> Value {
        let (v, err) = self.call(tool, args.clone());
        assert!(!err, "{tool}({args}) failed: {v}");
        v
    }

    /// A call that must fail; returns the error code.
    pub fn refused(&mut self, tool: &str, args: Value) -> String {
        let (v, err) = self.call(tool, args.clone());
        assert!(err, "{tool}({args}) was expected to fail: {v}");
        v["error"]["code"].as_str().unwrap_or("").to_string()
    }

    pub fn tool_names(&mut self) -> Vec<String> {
        let v = self.request("tools/list", json!({}));
        v["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// Waits until `job` is terminal; returns its state.
    pub fn wait_terminal(&mut self, job: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        let mut rev = 0i64;
        loop {
            let v = self.ok(
                "agents_wait",
                json!({"after_revision": {job: rev}, "timeout_seconds": 5}),
            );
            let j = &v["jobs"][job];
            rev = j["progress_revision"].as_i64().unwrap();
            let state = j["state"].as_str().unwrap().to_string();
            if matches!(
                state.as_str(),
                "completed" | "failed" | "stopped" | "cancelled" | "suspended"
            ) {
                return state;
            }
            assert!(Instant::now() < deadline, "job {job} is still {state}");
        }
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// SHA-256 of a file, lowercase hex.
pub fn sha256_file(p: &Path) -> String {
    use sha2::{Digest, Sha256};
    let b = std::fs::read(p).unwrap();
    Sha256::digest(&b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}
