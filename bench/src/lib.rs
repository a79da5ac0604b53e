//! What the harnesses share: a blocking MCP client over a real `vox mcp` stdio session, and
//! latency summaries.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

/// The `vox` binary beside the running harness (the harnesses' default `--vox`).
pub fn vox_beside_me() -> String {
    std::env::current_exe()
        .unwrap()
        .with_file_name("vox")
        .to_string_lossy()
        .into_owned()
}

/// A `vox mcp` session (JSON-RPC lines on its stdio, one request at a time).
pub struct Mcp {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Mcp {
    /// `vox mcp --profile <profile>` for workspace `ws` with `VOX_HOME=home`, plus `env`.
    pub fn start(vox: &str, ws: &Path, home: &Path, profile: &str, env: &[(&str, &str)]) -> Mcp {
        let mut cmd = Command::new(vox);
        cmd.args(["mcp", "--profile", profile])
            .current_dir(ws)
            .env("VOX_HOME", home)
            .env("VOX_WORKSPACE", ws)
            .env("VOX_LOG", "warn")
            .env_remove("VOX_PROFILE");
        for (k, v) in env {
            cmd.env(k, v);
        }
        Self::spawn(cmd)
    }

    /// Any stdio MCP server `cmd`, initialized.
    pub fn spawn(mut cmd: Command) -> Mcp {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("an MCP server");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
        let mut m = Mcp {
            child,
            stdin,
            stdout,
            next: 1,
        };
        m.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "vox-bench", "version": "1"}}),
        );
        m.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        m
    }
    /// Writes one JSON-RPC frame (a request or a notification) as a line on the session's stdin.
    pub fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_vec(v).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).expect("write");
    }
    /// Sends request `method` with `params` and blocks until the response with its id arrives
    /// (other frames are skipped); the whole response frame.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.stdout.read_line(&mut line).expect("read") > 0,
                "vox mcp ended"
            );
            let v: Value = serde_json::from_str(&line).expect("a JSON frame");
            if v["id"] == id {
                return v;
            }
        }
    }
    /// Keeps `depth` calls of `tool` in flight for `time`: completed calls per second.
    pub fn throughput(&mut self, tool: &str, args: &Value, depth: usize, time: Duration) -> f64 {
        let frame = |id: u64| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": tool, "arguments": args}})
        };
        for _ in 0..depth {
            let id = self.next;
            self.next += 1;
            self.send(&frame(id));
        }
        let started = std::time::Instant::now();
        let (mut done, mut in_flight) = (0u64, depth);
        let mut line = String::new();
        while in_flight > 0 {
            line.clear();
            assert!(
                self.stdout.read_line(&mut line).expect("read") > 0,
                "the server ended"
            );
            let v: Value = serde_json::from_str(&line).expect("a JSON frame");
            if v.get("id").is_none() {
                continue;
            }
            assert!(v["result"]["isError"] != true, "{v}");
            done += 1;
            in_flight -= 1;
            if started.elapsed() < time {
                let id = self.next;
                self.next += 1;
                self.send(&frame(id));
                in_flight += 1;
            }
        }
        done as f64 / started.elapsed().as_secs_f64()
    }

    /// Calls a tool that must succeed; its structured content.
    pub fn call(&mut self, tool: &str, args: Value) -> Value {
        let v = self.request("tools/call", json!({"name": tool, "arguments": args}));
        let r = &v["result"];
        assert!(r["isError"] != true, "{tool} {args}: {v}");
        r["structuredContent"].clone()
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Median and 99th percentile (µs) of `samples`.
pub fn summary(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i].as_secs_f64() * 1e6
    };
    (at(0.5), at(0.99))
}
