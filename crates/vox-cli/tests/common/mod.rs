//! Test harness: a temp workspace with its own VOX_HOME, the real binaries, the rmcp client.
#![allow(dead_code)]

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
