//! `mcp-bench`: measures any stdio MCP server command, so vox and its peers are measured the
//! same way on the same machine.
//!
//! ```text
//! mcp-bench [--runs N] [--calls N] [--tool NAME] [--args JSON] [--setup-tool NAME --setup-args JSON]
//!           [--before-each SHELL] [--rss-pid-file FILE] [--cwd DIR] -- <server command and args>
//! ```
//!
//! 1. start-up: N times, spawn the command, `initialize` → `notifications/initialized` →
//!    `tools/list`, and time spawn → the `tools/list` answer (`--before-each` runs a shell
//!    command first, e.g. to stop a daemon and measure a cold start);
//! 2. round trip: in one session, `--calls` sequential `tools/call` of `--tool` with `--args`;
//! 3. memory: VmRSS of the server process, or of the pid in `--rss-pid-file` (JSON with `pid`).

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

struct Opts {
    runs: usize,
    calls: usize,
    tool: Option<String>,
    args: Value,
    setup_tool: Option<String>,
    setup_args: Value,
    before_each: Option<String>,
    rss_pid_file: Option<String>,
    cwd: Option<String>,
    command: Vec<String>,
}

fn parse_opts() -> Result<Opts, String> {
    let mut o = Opts {
        runs: 20,
        calls: 2000,
        tool: None,
        args: json!({}),
        setup_tool: None,
        setup_args: json!({}),
        before_each: None,
        rss_pid_file: None,
        cwd: None,
        command: vec![],
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--runs" => o.runs = val("--runs")?.parse().map_err(|e| format!("--runs: {e}"))?,
            "--calls" => {
                o.calls = val("--calls")?
                    .parse()
                    .map_err(|e| format!("--calls: {e}"))?
            }
            "--tool" => o.tool = Some(val("--tool")?),
            "--args" => {
                o.args =
                    serde_json::from_str(&val("--args")?).map_err(|e| format!("--args: {e}"))?
            }
            "--setup-tool" => o.setup_tool = Some(val("--setup-tool")?),
            "--setup-args" => {
                o.setup_args = serde_json::from_str(&val("--setup-args")?)
                    .map_err(|e| format!("--setup-args: {e}"))?
            }
            "--before-each" => o.before_each = Some(val("--before-each")?),
            "--rss-pid-file" => o.rss_pid_file = Some(val("--rss-pid-file")?),
            "--cwd" => o.cwd = Some(val("--cwd")?),
            "--" => {
                o.command = it.by_ref().collect();
                break;
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.command.is_empty() {
        return Err("give the server command after --".into());
    }
    Ok(o)
}

struct Session {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Session {
    fn spawn(o: &Opts) -> Result<Self, String> {
        let mut cmd = Command::new(&o.command[0]);
        cmd.args(&o.command[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(d) = &o.cwd {
            cmd.current_dir(d);
        }
        let mut child = cmd.spawn().map_err(|e| format!("{}: {e}", o.command[0]))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        Ok(Session {
            child,
            stdin,
            stdout,
            next_id: 1,
        })
    }
    fn send(&mut self, v: &Value) -> Result<(), String> {
        let mut line = serde_json::to_vec(v).map_err(|e| e.to_string())?;
        line.push(b'\n');
        self.stdin
            .write_all(&line)
            .map_err(|e| format!("write: {e}"))
    }
    fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let mut line = String::new();
        loop {
            line.clear();
            if self
                .stdout
                .read_line(&mut line)
                .map_err(|e| format!("read: {e}"))?
                == 0
            {
                return Err(format!("server closed stdout during {method}"));
            }
            let v: Value = serde_json::from_str(&line).map_err(|e| format!("bad frame: {e}"))?;
            if v.get("id").and_then(Value::as_u64) == Some(id) {
                if let Some(e) = v.get("error") {
                    return Err(format!("{method}: {e}"));
                }
                return Ok(v["result"].clone());
            }
        }
    }
    fn initialize(&mut self) -> Result<(), String> {
        self.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "mcp-bench", "version": "1"}}),
        )?;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    }
    fn close(mut self) {
        drop(self.stdin);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn summary(name: &str, mut samples_us: Vec<f64>) -> Value {
    samples_us.sort_by(f64::total_cmp);
    let out = json!({
        "measure": name, "n": samples_us.len(),
        "median_us": percentile(&samples_us, 0.5), "p90_us": percentile(&samples_us, 0.9),
        "p99_us": percentile(&samples_us, 0.99), "min_us": samples_us.first(),
    });
    eprintln!(
        "{name:<28} n={:<6} median {:>10.1} µs  p90 {:>10.1} µs  p99 {:>10.1} µs",
        samples_us.len(),
        percentile(&samples_us, 0.5),
        percentile(&samples_us, 0.9),
        percentile(&samples_us, 0.99)
    );
    out
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn run() -> Result<(), String> {
    let o = parse_opts()?;
    let mut report = vec![];
    let mut startup = vec![];
    for _ in 0..o.runs {
        if let Some(sh) = &o.before_each {
            let mut c = Command::new("sh");
            c.arg("-c").arg(sh);
            if let Some(d) = &o.cwd {
                c.current_dir(d);
            }
            c.status().map_err(|e| format!("--before-each: {e}"))?;
        }
        let t = Instant::now();
        let mut s = Session::spawn(&o)?;
        s.initialize()?;
        let listed = s.request("tools/list", json!({}))?;
        startup.push(t.elapsed().as_secs_f64() * 1e6);
        if listed["tools"].as_array().is_none() {
            return Err("tools/list returned no tools array".into());
        }
        s.close();
    }
    report.push(summary("start_to_first_tools_list", startup));

    let mut s = Session::spawn(&o)?;
    s.initialize()?;
    if let Some(setup) = &o.setup_tool {
        s.request(
            "tools/call",
            json!({"name": setup, "arguments": o.setup_args}),
        )?;
    }
    if let Some(tool) = &o.tool {
        let params = json!({"name": tool, "arguments": o.args});
        for _ in 0..o.calls.min(50) {
            s.request("tools/call", params.clone())?;
        }
        let mut rt = Vec::with_capacity(o.calls);
        let all = Instant::now();
        for _ in 0..o.calls {
            let t = Instant::now();
            let r = s.request("tools/call", params.clone())?;
            rt.push(t.elapsed().as_secs_f64() * 1e6);
            if r.get("isError").and_then(Value::as_bool) == Some(true) {
                return Err(format!("{tool} returned an error: {r}"));
            }
        }
        let per_sec = o.calls as f64 / all.elapsed().as_secs_f64();
        let mut v = summary(&format!("tools_call {tool}"), rt);
        v["calls_per_sec"] = json!(per_sec);
        eprintln!("{:<28} {per_sec:.0} calls/s sequential", "");
        report.push(v);
    }
    let pid = match &o.rss_pid_file {
        Some(f) => {
            let text = std::fs::read_to_string(f).map_err(|e| format!("{f}: {e}"))?;
            let v: Value = serde_json::from_str(&text).map_err(|e| format!("{f}: {e}"))?;
            v["pid"].as_u64().ok_or(format!("{f}: no pid"))? as u32
        }
        None => s.child.id(),
    };
    if let Some(kib) = rss_kib(pid) {
        eprintln!("{:<28} {:.1} MiB (pid {pid})", "rss", kib as f64 / 1024.0);
        report.push(json!({"measure": "rss", "pid": pid, "rss_mib": kib as f64 / 1024.0}));
    }
    s.close();
    println!(
        "{}",
        serde_json::to_string_pretty(&report).unwrap_or_default()
    );
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("mcp-bench: {e}");
        std::process::exit(1);
    }
}
