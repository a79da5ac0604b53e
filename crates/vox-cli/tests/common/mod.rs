//! Test harness: a temp workspace with its own VOX_HOME, the real binaries, the rmcp client.
#![allow(dead_code)]

pub mod gateway;

use rmcp::model::{CallToolRequestParams, CallToolResult, ProtocolVersion, Tool};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const VOX: &str = env!("CARGO_BIN_EXE_vox");
pub const DAEMON: &str = env!("CARGO_BIN_EXE_vox-orchestrator-d");

pub type Client = RunningService<RoleClient, ()>;

/// A workspace and a user home that exist only for one test; its daemon is stopped on drop.
pub struct Ws {
    pub dir: tempfile::TempDir,
    pub home: tempfile::TempDir,
    pub env: Vec<(String, String)>,
}

impl Ws {
    pub fn new() -> Self {
        // Short paths: Unix socket paths are limited to 108 bytes.
        let dir = tempfile::Builder::new()
            .prefix("voxws")
            .tempdir_in("/tmp")
            .unwrap();
        let home = tempfile::Builder::new()
            .prefix("voxhome")
            .tempdir_in("/tmp")
            .unwrap();
        Ws {
            dir,
            home,
            env: vec![],
        }
    }
    pub fn with_env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }
    pub fn root(&self) -> &Path {
        self.dir.path()
    }
    fn apply(&self, cmd: &mut Command) {
        cmd.current_dir(self.root())
            .env("VOX_HOME", self.home.path())
            .env_remove("VOX_PROFILE")
            .env("VOX_WORKSPACE", self.root())
            .env_remove("VOX_DB_PATH")
            .env("VOX_LOG", "warn");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
    }
    /// Runs `vox <args>` to completion.
    pub fn vox(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(VOX);
        cmd.args(args);
        self.apply(&mut cmd);
        cmd.output().unwrap()
    }
    /// `vox mcp <args>` as a tokio command.
    pub fn mcp_command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = Command::new(VOX);
        cmd.arg("mcp").args(args);
        self.apply(&mut cmd);
        tokio::process::Command::from(cmd)
    }
    /// A connected rmcp client over `vox mcp`, legacy handshake.
    pub async fn client(&self, args: &[&str]) -> Client {
        let t = TokioChildProcess::new(self.mcp_command(args)).unwrap();
        ().serve(t).await.expect("MCP initialize")
    }
    /// A connected rmcp client using the 2026-07-28 `server/discover` era.
    pub async fn modern_client(&self, args: &[&str]) -> Client {
        let t = TokioChildProcess::new(self.mcp_command(args)).unwrap();
        ().serve_with_lifecycle(
            t,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("MCP discover")
    }
    pub fn daemon_status(&self) -> Value {
        let out = self.vox(&["daemon", "status", "--json"]);
        assert!(
            out.status.success(),
            "status: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
    pub fn stop_daemon(&self) {
        let out = self.vox(&["daemon", "stop"]);
        assert!(
            out.status.success(),
            "stop: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    pub fn vox_dir(&self) -> PathBuf {
        self.root().join(".vox")
    }
}

impl Drop for Ws {
    fn drop(&mut self) {
        let _ = self.vox(&["daemon", "stop"]);
    }
}

pub async fn tool_names(c: &Client) -> Vec<String> {
    c.list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}

pub async fn tools(c: &Client) -> Vec<Tool> {
    c.list_all_tools().await.unwrap()
}

pub async fn call(c: &Client, name: &str, args: Value) -> CallToolResult {
    let args = args.as_object().cloned().unwrap_or_default();
    c.call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(args))
        .await
        .unwrap()
}

/// Calls a tool that must succeed and returns its structured content.
pub async fn ok(c: &Client, name: &str, args: Value) -> Value {
    let r = call(c, name, args).await;
    assert_ne!(
        r.is_error,
        Some(true),
        "{name} failed: {:?}",
        r.structured_content
    );
    r.structured_content.unwrap_or(json!(null))
}

/// Calls a tool that must fail and returns its `error` object.
pub async fn err(c: &Client, name: &str, args: Value) -> Value {
    let r = call(c, name, args).await;
    assert_eq!(
        r.is_error,
        Some(true),
        "{name} unexpectedly succeeded: {:?}",
        r.structured_content
    );
    r.structured_content.unwrap()["error"].clone()
}

pub fn registry_slice(profile: &str) -> Vec<String> {
    let p = vox_mcp_registry::ProfileSet::parse(profile).unwrap();
    p.tools().iter().map(|t| t.name.to_owned()).collect()
}

pub fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Processes whose command line contains `needle`.
pub fn pids_running(needle: &str) -> Vec<u32> {
    let mut pids = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline)
            .replace('\0', " ")
            .contains(needle)
        {
            pids.push(pid);
        }
    }
    pids
}

/// Where the real Codex `codex.js` is (`CODEX_MMO_CODEX_JS`, which `.ci/run` exports), or
/// `None` after a notice on a developer's machine without it; under CI (`CI` set) a missing
/// one fails the test instead of passing silently.
pub fn codex_js() -> Option<String> {
    const VAR: &str = "CODEX_MMO_CODEX_JS";
    let Some(path) = std::env::var_os(VAR).filter(|v| !v.is_empty()) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{VAR} is unset under CI: .ci/run must install @openai/codex@0.169.0 and export it"
        );
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr().lock(),
            "NOTICE: a Codex app-server test did not run: set {VAR} to <dir>/node_modules/@openai/codex/bin/codex.js"
        );
        return None;
    };
    assert!(
        Path::new(&path).is_file(),
        "{VAR}={} is not a file",
        path.to_string_lossy()
    );
    Some(path.to_string_lossy().into_owned())
}

/// The real Codex app-server (JSON-RPC lines on stdio) under its own `CODEX_HOME`.
pub struct AppServer {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<Value>,
    next_id: i64,
}

impl AppServer {
    /// `env` is passed on to the MCP servers Codex starts.
    pub fn start(codex_js: &str, codex_home: &Path, cwd: &Path, env: &[(&str, &Path)]) -> Self {
        use std::io::BufRead;
        let mut command = Command::new("node");
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command
            .args([codex_js, "app-server"])
            .env("CODEX_HOME", codex_home)
            .current_dir(cwd)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `node {codex_js} app-server`: {e}"));
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
        AppServer {
            child,
            stdin,
            lines,
            next_id: 1,
        }
    }
    /// Sends a request and returns its answer (notifications in between are skipped).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        use std::io::Write;
        let id = self.next_id;
        self.next_id += 1;
        writeln!(
            self.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        )
        .unwrap();
        loop {
            let v = self
                .lines
                .recv_timeout(std::time::Duration::from_secs(90))
                .unwrap_or_else(|_| panic!("app-server answers {method} within 90 s"));
            if v["id"] == id {
                return v;
            }
        }
    }
    /// `initialize`, `initialized`, then `mcpServerStatus/list`: the status of MCP server
    /// `name` as Codex reports it (its `tools` by name).
    pub fn mcp_server(&mut self, name: &str) -> Value {
        self.request(
            "initialize",
            json!({"clientInfo": {"name": "vox-test", "version": "0"}}),
        );
        self.notify("initialized");
        let status = self.request("mcpServerStatus/list", json!({}));
        status["result"]["data"]
            .as_array()
            .and_then(|d| d.iter().find(|s| s["name"] == name))
            .unwrap_or_else(|| panic!("{name} in {status}"))
            .clone()
    }
    pub fn notify(&mut self, method: &str) {
        use std::io::Write;
        writeln!(
            self.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": method})
        )
        .unwrap();
    }
}

impl Drop for AppServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The pid of the workspace's daemon (its info file).
pub fn daemon_pid(ws: &Ws) -> u64 {
    let info: Value = serde_json::from_str(
        &std::fs::read_to_string(ws.vox_dir().join("orchestrator.json")).unwrap(),
    )
    .unwrap();
    info["pid"].as_u64().unwrap()
}

/// Calls `tool` (one that runs until cancelled) through `peer`, kills the daemon `pid` with
/// SIGKILL 300 ms in, and returns the call's answer (within 5 s).
pub async fn kill_daemon_under_call(
    peer: &rmcp::Peer<RoleClient>,
    tool: &'static str,
    pid: u64,
) -> CallToolResult {
    let call = tokio::spawn({
        let peer = peer.clone();
        async move { peer.call_tool(CallToolRequestParams::new(tool)).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!call.is_finished(), "{tool} ended before the kill");
    // SAFETY: kill(2) with a pid and a signal number has no memory effects on this process.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    tokio::time::timeout(std::time::Duration::from_secs(5), call)
        .await
        .expect("the call in flight is answered")
        .unwrap()
        .unwrap()
}

/// The scripted model (`crates/scripted-model`): a process answering the Responses API from
/// `script`, killed on drop.
pub struct Model {
    child: std::process::Child,
    /// The port it answers on.
    pub port: u16,
    /// Its request log (one JSON line per request, body included).
    pub log: PathBuf,
}

impl Model {
    /// Starts it in `dir` (its script, port file and log go there).
    pub fn start(dir: &std::path::Path, script: &Value) -> Model {
        let bin = PathBuf::from(VOX).with_file_name("scripted-model");
        assert!(bin.is_file(), "{} is not built", bin.display());
        let script_path = dir.join("script.json");
        std::fs::write(&script_path, serde_json::to_vec_pretty(script).unwrap()).unwrap();
        let port_file = dir.join("model.port");
        let log = dir.join("model.jsonl");
        let child = std::process::Command::new(bin)
            .arg("--script")
            .arg(&script_path)
            .arg("--port-file")
            .arg(&port_file)
            .arg("--log")
            .arg(&log)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let port = loop {
            if let Some(p) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                break p;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the scripted model did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        Model { child, port, log }
    }

    /// The requests it answered, as logged.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
