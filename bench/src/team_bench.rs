//! `team-bench`: measures the codex-mmo runtime end to end: the supervisor, `mmo_mesh`, the
//! operator's `agent-mcp`, and a real `codex app-server` (node + codex.js) per agent, with the
//! hosted model replaced by `scripted-model`.
//!
//! ```text
//! team-bench [--codex-mmo PATH] [--scripted-model PATH] [--runs N] [--refusals N]
//!            [--wakeups N] [--wake-delay-ms MS] [--idle K] [--swarm N] [--controls N]
//!            [--recover K] [--only LIST]
//!            [--keep] [--json]
//! ```
//!
//! `codex-mmo` and `scripted-model` are looked up next to this binary unless given.
//! `CODEX_MMO_CODEX_JS` must name @openai/codex's `bin/codex.js`. Everything runs in a fresh
//! temporary directory (data, config, a git workspace, a pack, the model's script and log),
//! removed at the end unless `--keep`.
//!
//! Figures (`--only` takes a comma list of their numbers):
//! 1. spawn → first worker event, `--runs` times (default 10): `agents_spawn` sent → its answer
//!    ("spawn returned"), → an `agents_wait` answer showing the run `running` (its app-server is
//!    up and its thread started: "host running"), → an answer whose `progress_revision` moved
//!    past that (the worker's first `agentMessage`: "first item"). One job at a time.
//! 2. admission decision: `--refusals` (default 200) `agents_spawn` calls that admission refuses
//!    (a task kind the role does not allow): the whole MCP round trip, no host started.
//! 3. `agents_wait` wake-up: one worker whose model says a line every `--wake-delay-ms`
//!    (default 500) `--wakeups` times (default 10) within one streamed answer; the harness
//!    blocks in `agents_wait` before each line. Per line: the wall clock when the wait's answer
//!    arrived minus the run's `updated_at` (ms since the epoch, written in the same statement
//!    as the revision the wait woke on), read with `agent_inspect` right after the wait
//!    returned. A sample is dropped when inspect shows a later revision than the wait, or when
//!    the change predates the wait. `updated_at` is truncated to the millisecond, so samples are
//!    high by 0–1 ms. Also: the spacing of consecutive answers minus the scripted delay.
//! 4. RSS per idle host: `--idle` (default 4) workers whose model request hangs; once every one
//!    is running and its request reached the model, VmRSS (and PSS) summed over each host's
//!    process tree (`host_pid` from inspect and its descendants, from /proc).
//! 5. concurrent workers: `--swarm` (default 8) spawns written at once (pipelined on one
//!    operator connection), each model answering a valid result at once: wall time from the
//!    first spawn sent until all are completed, and per job spawn → completed p50/p90.
//! 6. live control: one worker whose every model request hangs, `--controls` rounds (default
//!    10) of `agent_control` `steer` (command → answer: revision swapped, delivered to the
//!    host, answered, recorded), `pause` (→ answer: host retired, `paused`), `continue`
//!    (→ answer: admission again, `running`) and continue → the resumed thread's first model
//!    request (a new host started and `thread/resume`d).
//! 7. recovery after a supervisor restart: a second session with `--recover` workers (default
//!    4) whose model requests hang; once each is running and at the model, `kill -9` of the
//!    supervisor. Then: `codex-mmo resume` (the CLI recovers the session: hosts killed, runs
//!    `suspended`; a new supervisor takes it) → its exit; the operator continues every
//!    suspended worker (inspect + `continue` each) → all `running`; → every worker's resumed
//!    thread has made its model request (hosts started, `thread/resume`). All from the resume.
//!
//! The table goes to stdout (to stderr with `--json`, which prints the figures as JSON).

use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const USAGE: &str = "usage: team-bench [--codex-mmo PATH] [--scripted-model PATH] [--runs N] \
[--refusals N] [--wakeups N] [--wake-delay-ms MS] [--idle K] [--swarm N] [--controls N] [--recover K] [--only 1,2,3,4,5,6,7] \
[--keep] [--json]   (CODEX_MMO_CODEX_JS must name codex.js)";

/// How long one job may take before the bench gives up on it.
const JOB_TIMEOUT: Duration = Duration::from_secs(180);
/// How long one MCP answer may take.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

const REVIEW_CONTRACT: &str = r#"{
  "type": "object",
  "additionalProperties": false,
  "required": ["verdict", "findings"],
  "properties": {
    "verdict": { "enum": ["approve", "request_changes"] },
    "findings": {
      "type": "array",
      "items": {
        "type": "object",
        "additionalProperties": false,
        "required": ["relative_path", "sha256", "claim"],
        "properties": {
          "relative_path": { "type": "string" },
          "sha256": { "type": "string", "pattern": "^[0-9a-f]{64}$" },
          "claim": { "type": "string" }
        }
      }
    }
  }
}"#;

const LIB_RS: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n";

struct Opts {
    codex_mmo: PathBuf,
    scripted_model: PathBuf,
    runs: usize,
    refusals: usize,
    wakeups: usize,
    wake_delay_ms: u64,
    idle: usize,
    swarm: usize,
    controls: usize,
    recover: usize,
    only: Vec<u32>,
    keep: bool,
    json: bool,
}

fn number<T: std::str::FromStr>(name: &str, v: String) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    v.parse()
        .map_err(|e| format!("{name} {v:?}: {e} (a whole number)"))
}

fn parse_opts() -> Result<Opts, String> {
    let here = std::env::current_exe()
        .map_err(|e| format!("current_exe: {e}"))?
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut o = Opts {
        codex_mmo: here.join("codex-mmo"),
        scripted_model: here.join("scripted-model"),
        runs: 10,
        refusals: 200,
        wakeups: 10,
        wake_delay_ms: 500,
        idle: 4,
        swarm: 8,
        controls: 10,
        recover: 4,
        only: vec![1, 2, 3, 4, 5, 6, 7],
        keep: false,
        json: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--codex-mmo" => o.codex_mmo = PathBuf::from(val()?),
            "--scripted-model" => o.scripted_model = PathBuf::from(val()?),
            "--runs" => o.runs = number(&a, val()?)?,
            "--refusals" => o.refusals = number(&a, val()?)?,
            "--wakeups" => o.wakeups = number(&a, val()?)?,
            "--wake-delay-ms" => o.wake_delay_ms = number(&a, val()?)?,
            "--idle" => o.idle = number(&a, val()?)?,
            "--swarm" => o.swarm = number(&a, val()?)?,
            "--controls" => o.controls = number(&a, val()?)?,
            "--recover" => o.recover = number(&a, val()?)?,
            "--only" => {
                o.only = val()?
                    .split(',')
                    .map(|s| number::<u32>("--only", s.trim().to_string()))
                    .collect::<Result<_, _>>()?;
            }
            "--keep" => o.keep = true,
            "--json" => o.json = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
    }
    for (name, p) in [
        ("codex-mmo", &o.codex_mmo),
        ("scripted-model", &o.scripted_model),
    ] {
        if !p.is_file() {
            return Err(format!(
                "{name} not found at {} (build it, or pass --{name} PATH)",
                p.display()
            ));
        }
    }
    if o.only.iter().any(|n| !(1..=7).contains(n)) {
        return Err("--only takes figure numbers 1 to 7".into());
    }
    if o.recover == 0 || o.recover > 63 {
        return Err("--recover must be 1 to 63".into());
    }
    if o.swarm == 0 || o.swarm > 63 {
        return Err("--swarm must be 1 to 63".into());
    }
    if o.idle == 0 || o.idle > 63 {
        return Err("--idle must be 1 to 63".into());
    }
    if o.wake_delay_ms < 100 {
        return Err(
            "--wake-delay-ms must be at least 100 (the harness inspects between lines)".into(),
        );
    }
    Ok(o)
}

fn epoch_ms_f64(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Nearest-rank percentile of an unsorted sample.
fn pct(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p / 100.0) * s.len() as f64).ceil() as usize;
    s[rank.clamp(1, s.len()) - 1]
}

fn summary(v: &[f64]) -> Value {
    json!({
        "n": v.len(),
        "p50": pct(v, 50.0),
        "p90": pct(v, 90.0),
        "min": pct(v, 0.0),
        "max": pct(v, 100.0),
    })
}

/// The world: temp directories, the model process, the sessions started.
struct World {
    root: PathBuf,
    codex_mmo: PathBuf,
    codex_js: PathBuf,
    port: u16,
    model: Option<Child>,
    sessions: Vec<String>,
    keep: bool,
    /// Wall time of each `codex-mmo inspect --json` process.
    inspect_ms: std::cell::RefCell<Vec<f64>>,
}

impl World {
    fn new(o: &Opts, codex_js: PathBuf) -> Result<World, String> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let root = std::env::temp_dir().join(format!("team-bench-{}-{nanos}", std::process::id()));
        for d in ["data", "config/codex-mmo/tool-mcp.d", "packs", "ws"] {
            std::fs::create_dir_all(root.join(d))
                .map_err(|e| format!("{}: {e}", root.join(d).display()))?;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("choosing a port: {e}"))?
            .port();
        // The scripted catalog's route sends MMO_TEST_KEY to the model: the operator's consent.
        let consent = root.join("config/codex-mmo/credentials.toml");
        std::fs::write(
            &consent,
            format!(
                "[[allow]]\ncredential_env = \"MMO_TEST_KEY\"\norigin = \"http://127.0.0.1:{port}\"\n"
            ),
        )
        .map_err(|e| format!("{}: {e}", consent.display()))?;
        Ok(World {
            root,
            codex_mmo: o.codex_mmo.clone(),
            codex_js,
            port,
            model: None,
            sessions: vec![],
            keep: o.keep,
            inspect_ms: Default::default(),
        })
    }

    fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }

    fn model_log(&self) -> PathBuf {
        self.root.join("model.jsonl")
    }

    fn git_workspace(&self) -> Result<(), String> {
        let ws = self.ws();
        std::fs::create_dir_all(ws.join("src")).map_err(|e| e.to_string())?;
        std::fs::write(ws.join("src/lib.rs"), LIB_RS).map_err(|e| e.to_string())?;
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["-c", "user.name=b", "-c", "user.email=b@e", "add", "-A"],
            &[
                "-c",
                "user.name=b",
                "-c",
                "user.email=b@e",
                "commit",
                "-qm",
                "base",
            ],
        ] {
            let o = Command::new("git")
                .args(args)
                .current_dir(&ws)
                .output()
                .map_err(|e| format!("git: {e}"))?;
            if !o.status.success() {
                return Err(format!(
                    "git {args:?}: {}",
                    String::from_utf8_lossy(&o.stderr)
                ));
            }
        }
        Ok(())
    }

    fn pack(&self, swarm: usize) -> Result<PathBuf, String> {
        let dir = self.root.join("packs/team-bench");
        for d in ["agents", "contracts"] {
            std::fs::create_dir_all(dir.join(d)).map_err(|e| e.to_string())?;
        }
        let max_active = swarm.max(8);
        let profile = format!(
            r#"schema_version = 8
id = "team-bench"
version = "8.0.0"
display_name = "Team bench"
description = "A root and a strict reviewer on a scripted model, for team-bench."
maturity = "lab"
root = "lead"

[agents.lead]
kind = "root"
description = "Root"
model = "scripted_responses__scripted_large"
reasoning = "none"
permissions = "workspace-write"
can_spawn = ["reviewer"]
max_active = 1
trust = "high"
instructions = "agents/lead.md"

[agents.lead.controls.reviewer]
actions = ["inspect", "steer", "pause", "continue", "stop"]

[agents.reviewer]
description = "Strict reviewer"
model = "scripted_responses__scripted_large"
reasoning = "none"
permissions = "read-only"
backends = ["mcp"]
max_active = {max_active}
allowed_task_kinds = ["review"]
trust = "adversarial_reviewer"
verification = "root_adjudication"
contract_enforcement = "strict"
output_contract = "contracts/review.json"
instructions = "agents/reviewer.md"

[coordination]
max_active_agents = {}
max_active_writers = 0
max_children_per_agent = {max_active}
"#,
            max_active + 1
        );
        let files = [
            ("profile.toml", profile),
            ("catalog.toml", scripted_catalog(self.port)),
            ("agents/lead.md", "You lead the bench team.".to_string()),
            (
                "agents/reviewer.md",
                "You review code and answer with JSON only.".to_string(),
            ),
            ("contracts/review.json", REVIEW_CONTRACT.to_string()),
        ];
        for (p, text) in files {
            std::fs::write(dir.join(p), text).map_err(|e| e.to_string())?;
        }
        Ok(dir)
    }

    fn start_model(&mut self, scripted_model: &Path, script: &Value) -> Result<(), String> {
        let script_path = self.root.join("script.json");
        std::fs::write(
            &script_path,
            serde_json::to_vec_pretty(script).map_err(|e| e.to_string())?,
        )
        .map_err(|e| e.to_string())?;
        let port_file = self.root.join("model.port");
        let child = Command::new(scripted_model)
            .arg("--script")
            .arg(&script_path)
            .arg("--port")
            .arg(self.port.to_string())
            .arg("--port-file")
            .arg(&port_file)
            .arg("--log")
            .arg(self.model_log())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("{}: {e}", scripted_model.display()))?;
        self.model = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if std::fs::read_to_string(&port_file).is_ok_and(|t| t.trim() == self.port.to_string())
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err("the scripted model did not report its port".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn model_requests(&self) -> Vec<Value> {
        std::fs::read_to_string(self.model_log())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(&self.codex_mmo);
        c.env_remove("XDG_DATA_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .env("CODEX_MMO_DATA_DIR", self.root.join("data"))
            .env("CODEX_MMO_CONFIG_DIR", self.root.join("config/codex-mmo"))
            .env("CODEX_MMO_CODEX_JS", &self.codex_js)
            .env("MMO_TEST_KEY", "bench-key")
            .current_dir(self.ws());
        c
    }

    fn run(&self, args: &[&str]) -> Result<String, String> {
        let o = self
            .cmd()
            .args(args)
            .output()
            .map_err(|e| format!("codex-mmo {args:?}: {e}"))?;
        if !o.status.success() {
            return Err(format!(
                "codex-mmo {args:?}: {}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&o.stdout).to_string())
    }

    fn start_session(&mut self, pack: &Path) -> Result<String, String> {
        let out = self.run(&["run", "--profile", &pack.to_string_lossy(), "--detach"])?;
        let id = out.trim().to_string();
        self.sessions.push(id.clone());
        Ok(id)
    }

    fn inspect(&self, session: &str) -> Result<Value, String> {
        let t = Instant::now();
        let out = self.run(&["inspect", session, "--json"])?;
        self.inspect_ms.borrow_mut().push(ms(t.elapsed()));
        serde_json::from_str(&out).map_err(|e| format!("inspect --json: {e}"))
    }

    fn stop(&self, session: &str) -> Result<(), String> {
        self.run(&["stop", session]).map(|_| ())
    }

    fn operator(&self, session: &str) -> Result<Mcp, String> {
        let mut c = self.cmd();
        c.args(["agent-mcp", "--session", session]);
        Mcp::start(c)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for s in &self.sessions {
            let _ = self.cmd().args(["stop", s]).output();
        }
        if let Some(mut m) = self.model.take() {
            let _ = m.kill();
            let _ = m.wait();
        }
        if self.keep {
            eprintln!("kept {}", self.root.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// A catalog overlay with one route to the scripted model.
fn scripted_catalog(port: u16) -> String {
    format!(
        r#"schema_version = 8

[resource_groups.scripted]
capacity = 64
description = "The scripted model process of team-bench"

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
"#
    )
}

/// One frame from the server, with the clocks read right after it arrived.
struct Frame {
    at: Instant,
    wall: SystemTime,
    v: Value,
}

/// A stdio MCP client whose frames are read (and timestamped) by a thread.
struct Mcp {
    child: Child,
    stdin: ChildStdin,
    rx: Receiver<Frame>,
    next: i64,
    early: HashMap<i64, Frame>,
}

impl Mcp {
    fn start(mut c: Command) -> Result<Mcp, String> {
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("agent-mcp: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut line = String::new();
            loop {
                line.clear();
                match r.read_line(&mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let (at, wall) = (Instant::now(), SystemTime::now());
                if let Ok(v) = serde_json::from_str(&line)
                    && tx.send(Frame { at, wall, v }).is_err()
                {
                    return;
                }
            }
        });
        let mut m = Mcp {
            child,
            stdin,
            rx,
            next: 1,
            early: HashMap::new(),
        };
        let id = m.send("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "team-bench", "version": "1"}}))?;
        let init = m.recv(id)?;
        if init.v.get("result").is_none() {
            return Err(format!("initialize: {}", init.v));
        }
        m.write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(m)
    }

    fn write(&mut self, v: &Value) -> Result<(), String> {
        writeln!(self.stdin, "{v}")
            .and_then(|_| self.stdin.flush())
            .map_err(|e| format!("writing to agent-mcp: {e}"))
    }

    /// Sends a request; returns its id.
    fn send(&mut self, method: &str, params: Value) -> Result<i64, String> {
        let id = self.next;
        self.next += 1;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        Ok(id)
    }

    fn send_call(&mut self, tool: &str, args: Value) -> Result<i64, String> {
        self.send("tools/call", json!({"name": tool, "arguments": args}))
    }

    /// The answer to request `id` (answers to other ids are kept for later).
    fn recv(&mut self, id: i64) -> Result<Frame, String> {
        if let Some(f) = self.early.remove(&id) {
            return Ok(f);
        }
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(f) => match f.v.get("id").and_then(Value::as_i64) {
                    Some(got) if got == id => return Ok(f),
                    Some(got) => {
                        self.early.insert(got, f);
                    }
                    None => {}
                },
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!("no answer to request {id} in {ANSWER_TIMEOUT:?}"));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err("agent-mcp closed its output".into());
                }
            }
        }
    }

    /// `tools/call`: (structured content, is error, the frame's arrival).
    fn call(&mut self, tool: &str, args: Value) -> Result<(Value, bool, Frame), String> {
        let id = self.send_call(tool, args)?;
        let f = self.recv(id)?;
        let (sc, err) = split_result(&f.v);
        Ok((sc, err, f))
    }

    fn ok(&mut self, tool: &str, args: Value) -> Result<(Value, Frame), String> {
        let (v, err, f) = self.call(tool, args.clone())?;
        if err {
            return Err(format!("{tool}({args}) failed: {v}"));
        }
        Ok((v, f))
    }
}

fn split_result(v: &Value) -> (Value, bool) {
    let r = &v["result"];
    if r.is_null() {
        return (v["error"].clone(), true);
    }
    (
        r["structuredContent"].clone(),
        r["isError"].as_bool().unwrap_or(false),
    )
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is_terminal(state: &str) -> bool {
    matches!(
        state,
        "completed" | "failed" | "stopped" | "cancelled" | "suspended"
    )
}

fn sha256_of(p: &Path) -> Result<String, String> {
    let o = Command::new("sha256sum")
        .arg(p)
        .output()
        .map_err(|e| format!("sha256sum: {e}"))?;
    let text = String::from_utf8_lossy(&o.stdout);
    let h = text.split_whitespace().next().unwrap_or("").to_string();
    if h.len() != 64 {
        return Err(format!("sha256sum {}: {text}", p.display()));
    }
    Ok(h)
}

fn run_of<'a>(inspect: &'a Value, job: &str) -> Option<&'a Value> {
    inspect["runs"]
        .as_array()?
        .iter()
        .find(|r| r["job"].as_str() == Some(job))
}

/// Figure 1: one job at a time.
fn spawn_to_first_event(op: &mut Mcp, runs: usize) -> Result<Value, String> {
    let (mut returned, mut running, mut first, mut completed) = (vec![], vec![], vec![], vec![]);
    let mut coalesced = 0;
    let mut not_completed = vec![];
    for i in 0..runs {
        let args = json!({"role": "reviewer", "task": format!("TB-FIRST-{i:03}: review src/lib.rs for correctness."), "task_kind": "review"});
        let t0 = Instant::now();
        let (v, f) = op.ok("agents_spawn", args)?;
        returned.push(ms(f.at - t0));
        let job = v["job"].as_str().ok_or("spawn: no job")?.to_string();
        let mut rev = v["progress_revision"]
            .as_i64()
            .ok_or("spawn: no revision")?;
        let mut rev_running = None;
        let mut got_first = false;
        let deadline = Instant::now() + JOB_TIMEOUT;
        loop {
            let (w, f) = op.ok(
                "agents_wait",
                json!({"after_revision": {job.as_str(): rev}, "timeout_seconds": 30}),
            )?;
            let j = &w["jobs"][job.as_str()];
            rev = j["progress_revision"].as_i64().unwrap_or(rev);
            let state = j["state"].as_str().unwrap_or("").to_string();
            let at = ms(f.at - t0);
            if rev_running.is_none() && (state == "running" || is_terminal(&state)) {
                running.push(at);
                rev_running = Some(rev);
                if is_terminal(&state) {
                    coalesced += 1;
                }
            } else if let Some(r) = rev_running
                && !got_first
                && rev > r
            {
                first.push(at);
                got_first = true;
            }
            if is_terminal(&state) {
                if state == "completed" {
                    completed.push(at);
                } else {
                    not_completed.push(format!("{job}: {state}"));
                }
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("job {job} is still {state} after {JOB_TIMEOUT:?}"));
            }
        }
        eprintln!(
            "  [1] run {}/{runs}: returned {:.1} ms, running {:.0} ms, first item {} ms",
            i + 1,
            returned.last().unwrap_or(&f64::NAN),
            running.last().unwrap_or(&f64::NAN),
            if got_first {
                format!("{:.0}", first.last().unwrap_or(&f64::NAN))
            } else {
                "-".into()
            }
        );
    }
    Ok(json!({
        "spawn_returned_ms": summary(&returned),
        "host_running_ms": summary(&running),
        "first_item_ms": summary(&first),
        "completed_ms": summary(&completed),
        "running_seen_only_when_terminal": coalesced,
        "not_completed": not_completed,
    }))
}

/// Figure 2: refused spawns.
fn admission_refusals(op: &mut Mcp, n: usize) -> Result<Value, String> {
    let mut us = Vec::with_capacity(n);
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..n {
        let args = json!({"role": "reviewer", "task": format!("TB-REFUSED-{i}: implement a feature in src/lib.rs."), "task_kind": "implementation"});
        let t0 = Instant::now();
        let (v, err, f) = op.call("agents_spawn", args)?;
        us.push((f.at - t0).as_secs_f64() * 1e6);
        if !err {
            return Err(format!("a spawn that should be refused was admitted: {v}"));
        }
        let code = v["error"]["code"].as_str().unwrap_or("?").to_string();
        *codes.entry(code).or_default() += 1;
    }
    Ok(json!({"round_trip_us": summary(&us), "codes": codes}))
}

/// Waits until the model has had more than `seen` requests of `actor`.
fn wait_requests(w: &World, actor: &str, seen: usize) -> Result<usize, String> {
    let deadline = Instant::now() + JOB_TIMEOUT;
    loop {
        let n = w
            .model_requests()
            .iter()
            .filter(|r| r["actor"] == actor)
            .count();
        if n > seen {
            return Ok(n);
        }
        if Instant::now() > deadline {
            return Err(format!("no new request of `{actor}` in {JOB_TIMEOUT:?}"));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Figure 6: steer, pause and continue of one worker whose model requests hang.
fn control(w: &World, op: &mut Mcp, n: usize) -> Result<Value, String> {
    let args =
        json!({"role": "reviewer", "task": "TB-CTL: review src/lib.rs.", "task_kind": "review"});
    let (v, _) = op.ok("agents_spawn", args)?;
    let run = v["agent_run_ref"].as_str().unwrap_or("").to_string();
    let mut seen = wait_requests(w, "ctl", 0)?;
    let (mut steer, mut pause, mut cont, mut resumed) = (vec![], vec![], vec![], vec![]);
    for i in 0..n {
        let (insp, _) = op.ok(
            "agent_control",
            json!({"agent_run_ref": run, "action": "inspect"}),
        )?;
        let mut rev = insp["control_revision"].as_i64().unwrap_or(0);
        let t = Instant::now();
        let (_, f) = op.ok("agent_control", json!({"agent_run_ref": run, "action": "steer", "control_revision": rev, "message": format!("steer {i}")}))?;
        steer.push(ms(f.at - t));
        rev += 1;
        let t = Instant::now();
        let (p, f) = op.ok(
            "agent_control",
            json!({"agent_run_ref": run, "action": "pause", "control_revision": rev}),
        )?;
        pause.push(ms(f.at - t));
        if p["state"] != "paused" {
            return Err(format!("pause answered state {}", p["state"]));
        }
        rev += 1;
        let t = Instant::now();
        let (_, f) = op.ok(
            "agent_control",
            json!({"agent_run_ref": run, "action": "continue", "control_revision": rev}),
        )?;
        cont.push(ms(f.at - t));
        seen = wait_requests(w, "ctl", seen)?;
        resumed.push(ms(t.elapsed()));
    }
    let (insp, _) = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "inspect"}),
    )?;
    op.ok("agent_control", json!({"agent_run_ref": run, "action": "stop", "control_revision": insp["control_revision"]}))?;
    Ok(json!({
        "steer_ms": summary(&steer),
        "pause_ms": summary(&pause),
        "continue_ms": summary(&cont),
        "continue_to_model_ms": summary(&resumed),
    }))
}

/// Figure 7: `k` hanging workers, `kill -9` of their supervisor, `codex-mmo resume`, and the
/// operator continuing each on its own thread.
fn recovery(w: &mut World, pack: &Path, k: usize) -> Result<Value, String> {
    let session = w.start_session(pack)?;
    let mut op = w.operator(&session)?;
    let mut runs = vec![];
    for i in 0..k {
        let args = json!({"role": "reviewer", "task": format!("TB-REC-{i:02}: review src/lib.rs."), "task_kind": "review"});
        let (v, _) = op.ok("agents_spawn", args)?;
        runs.push(v["agent_run_ref"].as_str().unwrap_or("").to_string());
    }
    let deadline = Instant::now() + JOB_TIMEOUT;
    let supervisor = loop {
        let insp = w.inspect(&session)?;
        let running = runs
            .iter()
            .filter(|r| {
                insp["runs"].as_array().into_iter().flatten().any(|x| {
                    x["agent_run_ref"] == r.as_str()
                        && x["state"] == "running"
                        && x["thread_id"].is_string()
                })
            })
            .count();
        let asked = w
            .model_requests()
            .iter()
            .filter(|r| r["actor"] == "rec")
            .count();
        if running == k && asked >= k {
            break insp["supervisor_pid"].as_i64().unwrap_or(0) as i32;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{running} of {k} workers running, {asked} at the model"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(op);
    // SAFETY: kill(2) takes plain integers and touches no memory of ours; `supervisor` is the
    // supervisor this bench's daemon reported for its own workspace.
    unsafe {
        libc::kill(supervisor, libc::SIGKILL);
    }
    std::thread::sleep(Duration::from_millis(200));
    let asked_before = w
        .model_requests()
        .iter()
        .filter(|r| r["actor"] == "rec")
        .count();
    let t = Instant::now();
    let out = w.run(&["resume", &session, "--json"])?;
    let resume_ms = ms(t.elapsed());
    let resumed: Value = serde_json::from_str(&out).map_err(|e| format!("resume --json: {e}"))?;
    let mut op = w.operator(&session)?;
    for run in &runs {
        let (insp, _) = op.ok(
            "agent_control",
            json!({"agent_run_ref": run, "action": "inspect"}),
        )?;
        if insp["state"] != "suspended" {
            return Err(format!(
                "{run} is {} after the restart, not suspended",
                insp["state"]
            ));
        }
        op.ok("agent_control", json!({"agent_run_ref": run, "action": "continue", "control_revision": insp["control_revision"]}))?;
    }
    let continued_ms = ms(t.elapsed());
    let deadline = Instant::now() + JOB_TIMEOUT;
    while w
        .model_requests()
        .iter()
        .filter(|r| r["actor"] == "rec")
        .count()
        < asked_before + k
    {
        if Instant::now() > deadline {
            return Err("the continued workers never reached the model".into());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let at_model_ms = ms(t.elapsed());
    drop(op);
    w.stop(&session)?;
    Ok(json!({
        "workers": k,
        "resume_cli_ms": resume_ms,
        "all_continued_ms": continued_ms,
        "all_at_model_ms": at_model_ms,
        "awaiting_continue": resumed["awaiting_continue"].as_array().map(Vec::len),
    }))
}

/// Figure 3: a worker that says a line every `delay` ms; block in agents_wait before each.
fn wait_wakeup(op: &mut Mcp, n: usize, delay: u64) -> Result<Value, String> {
    let args = json!({"role": "reviewer", "task": "TB-WAKE: review src/lib.rs and report as you go.", "task_kind": "review"});
    let (v, _) = op.ok("agents_spawn", args)?;
    let job = v["job"].as_str().ok_or("spawn: no job")?.to_string();
    let run_ref = v["agent_run_ref"].as_str().unwrap_or("").to_string();
    let mut rev = v["progress_revision"].as_i64().unwrap_or(0);
    let tick_of = |insp: &Value| -> Option<usize> {
        insp["preview"]
            .as_str()?
            .strip_prefix("tick ")?
            .parse()
            .ok()
    };
    let (mut gap, mut spacing) = (vec![], vec![]);
    let (mut late, mut mismatched) = (0, 0);
    // The previous sample: (tick, when its wait answer arrived).
    let mut prev: Option<(usize, Instant)> = None;
    let mut last_tick = None;
    let deadline = Instant::now() + JOB_TIMEOUT;
    while last_tick.is_none_or(|t| t < n) {
        let sent = SystemTime::now();
        let (r, f) = op.ok(
            "agents_wait",
            json!({"after_revision": {job.as_str(): rev}, "timeout_seconds": 30}),
        )?;
        let j = &r["jobs"][job.as_str()];
        let state = j["state"].as_str().unwrap_or("");
        if is_terminal(state) {
            return Err(format!("the wake-up job ended early: {state}"));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the wake-up job reached tick {last_tick:?} of {n} in {JOB_TIMEOUT:?}"
            ));
        }
        if r["timed_out"] == true {
            continue;
        }
        let woke = j["progress_revision"].as_i64().unwrap_or(rev);
        let (insp, _) = op.ok("agent_inspect", json!({"agent_run_ref": run_ref}))?;
        rev = insp["progress_revision"].as_i64().unwrap_or(woke);
        let Some(tick) = tick_of(&insp) else {
            continue; // `running`, before the first line
        };
        let first = last_tick.is_none();
        last_tick = Some(tick);
        if first {
            continue; // tick 0 (or whatever came first) may have come before the wait
        }
        if rev != woke {
            mismatched += 1; // another change came in before the inspect
            prev = None;
            continue;
        }
        let updated = insp["updated_at"].as_i64().unwrap_or(0) as f64;
        if updated < epoch_ms_f64(sent).floor() {
            late += 1; // the change was there before the wait was sent
            prev = None;
            continue;
        }
        gap.push(epoch_ms_f64(f.wall) - updated);
        if let Some((t, at)) = prev
            && t + 1 == tick
        {
            spacing.push(ms(f.at - at) - delay as f64);
        }
        prev = Some((tick, f.at));
    }
    // Stop the worker through the control graph (its model request hangs after the last line).
    let (seen, _) = op.ok(
        "agent_control",
        json!({"agent_run_ref": run_ref, "action": "inspect"}),
    )?;
    op.ok("agent_control", json!({"agent_run_ref": run_ref, "action": "stop", "control_revision": seen["control_revision"]}))?;
    Ok(json!({
        "durable_to_return_ms": summary(&gap),
        "return_spacing_minus_delay_ms": summary(&spacing),
        "delay_ms": delay,
        "skipped_change_before_wait": late,
        "skipped_revision_moved_again": mismatched,
    }))
}

/// Figure 5: `n` spawns written at once; until all are terminal.
fn concurrent(op: &mut Mcp, n: usize) -> Result<Value, String> {
    let t0 = Instant::now();
    let mut ids = vec![];
    for i in 0..n {
        let args = json!({"role": "reviewer", "task": format!("TB-SWARM-{i:02}: review src/lib.rs for correctness."), "task_kind": "review"});
        ids.push(op.send_call("agents_spawn", args)?);
    }
    let mut revs: BTreeMap<String, i64> = BTreeMap::new();
    let mut spawn_returned = vec![];
    for id in ids {
        let f = op.recv(id)?;
        let (v, err) = split_result(&f.v);
        if err {
            return Err(format!("concurrent spawn refused: {v}"));
        }
        spawn_returned.push(ms(f.at - t0));
        revs.insert(
            v["job"].as_str().unwrap_or("").to_string(),
            v["progress_revision"].as_i64().unwrap_or(0),
        );
    }
    let mut done: BTreeMap<String, (String, f64)> = BTreeMap::new();
    let deadline = Instant::now() + JOB_TIMEOUT;
    while done.len() < n {
        let pending: BTreeMap<&String, i64> = revs
            .iter()
            .filter(|(j, _)| !done.contains_key(*j))
            .map(|(j, r)| (j, *r))
            .collect();
        let (r, f) = op.ok(
            "agents_wait",
            json!({"after_revision": pending, "timeout_seconds": 30}),
        )?;
        for (job, j) in r["jobs"].as_object().into_iter().flatten() {
            if let Some(rev) = j["progress_revision"].as_i64() {
                revs.insert(job.clone(), rev);
            }
            let state = j["state"].as_str().unwrap_or("");
            if is_terminal(state) && !done.contains_key(job) {
                done.insert(job.clone(), (state.to_string(), ms(f.at - t0)));
            }
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{} of {n} jobs done after {JOB_TIMEOUT:?}",
                done.len()
            ));
        }
    }
    let per_job: Vec<f64> = done.values().map(|(_, t)| *t).collect();
    let wall = per_job.iter().copied().fold(0.0, f64::max);
    let mut states: BTreeMap<String, usize> = BTreeMap::new();
    for (s, _) in done.values() {
        *states.entry(s.clone()).or_default() += 1;
    }
    Ok(json!({
        "jobs": n,
        "wall_ms": wall,
        "spawn_returned_ms": summary(&spawn_returned),
        "spawn_to_terminal_ms": summary(&per_job),
        "states": states,
    }))
}

/// Every process's parent, from /proc.
fn parents() -> HashMap<u32, u32> {
    let mut m = HashMap::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            && let Some(rest) = stat.rsplit(')').next()
            && let Some(ppid) = rest.split_whitespace().nth(1)
            && let Ok(ppid) = ppid.parse()
        {
            m.insert(pid, ppid);
        }
    }
    m
}

fn tree(root: u32, parents: &HashMap<u32, u32>) -> Vec<u32> {
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parents.iter().filter(|(_, pp)| **pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out
}

/// A /proc/<pid>/status or smaps_rollup field in KiB.
fn kib(pid: u32, file: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/{file}"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Figure 4: `k` hanging workers; RSS of each host's tree.
fn idle_rss(w: &World, session: &str, op: &mut Mcp, k: usize) -> Result<Value, String> {
    let mut jobs = vec![];
    for i in 0..k {
        let args = json!({"role": "reviewer", "task": format!("TB-IDLE-{i:02}: review src/lib.rs and take your time."), "task_kind": "review"});
        let (v, _) = op.ok("agents_spawn", args)?;
        jobs.push(v["job"].as_str().unwrap_or("").to_string());
    }
    let deadline = Instant::now() + JOB_TIMEOUT;
    let pids: Vec<u32> = loop {
        let insp = w.inspect(session)?;
        let pids: Vec<u32> = jobs
            .iter()
            .filter_map(|j| run_of(&insp, j))
            .filter(|r| r["state"] == "running")
            .filter_map(|r| r["host_pid"].as_u64().map(|p| p as u32))
            .collect();
        let asked = w
            .model_requests()
            .iter()
            .filter(|r| r["actor"] == "idle")
            .count();
        if pids.len() == k && asked >= k {
            break pids;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{} of {k} idle hosts running, {asked} model requests",
                pids.len()
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    // Let start-up settle.
    std::thread::sleep(Duration::from_secs(2));
    let insp = w.inspect(session)?;
    let parents = parents();
    let mut hosts = vec![];
    let (mut rss_mib, mut pss_mib) = (vec![], vec![]);
    for pid in &pids {
        let t = tree(*pid, &parents);
        let rss: u64 = t.iter().map(|p| kib(*p, "status", "VmRSS:")).sum();
        let pss: u64 = t.iter().map(|p| kib(*p, "smaps_rollup", "Pss:")).sum();
        rss_mib.push(rss as f64 / 1024.0);
        pss_mib.push(pss as f64 / 1024.0);
        let procs: Vec<String> = t
            .iter()
            .filter(|p| !comm(**p).is_empty())
            .map(|p| format!("{}({}: {} KiB)", comm(*p), p, kib(*p, "status", "VmRSS:")))
            .collect();
        hosts.push(json!({"host_pid": pid, "rss_kib": rss, "pss_kib": pss, "processes": procs}));
    }
    let sup = insp["supervisor_pid"].as_u64().map(|p| p as u32);
    let sup_rss = sup.map(|p| kib(p, "status", "VmRSS:") as f64 / 1024.0);
    Ok(json!({
        "hosts": hosts,
        "rss_mib_per_host": summary(&rss_mib),
        "pss_mib_per_host": summary(&pss_mib),
        "rss_mib_total": rss_mib.iter().sum::<f64>(),
        "supervisor_rss_mib": sup_rss,
    }))
}

fn script(o: &Opts, verdict: &str) -> Value {
    let first: Vec<Value> = (0..o.runs + 4)
        .map(|_| json!([{"say": "looking at src/lib.rs"}, {"delay_ms": 200}, {"say": verdict}]))
        .collect();
    let mut wake = vec![json!({"say": "tick 0"})];
    for k in 1..=o.wakeups {
        wake.push(json!({"delay_ms": o.wake_delay_ms}));
        wake.push(json!({"say": format!("tick {k}")}));
    }
    wake.push(json!({"hang": true}));
    let swarm: Vec<Value> = (0..o.swarm + 4)
        .map(|_| json!([{"say": verdict}]))
        .collect();
    let idle: Vec<Value> = (0..o.idle + 4).map(|_| json!([{"hang": true}])).collect();
    let ctl: Vec<Value> = (0..2 * o.controls + 4)
        .map(|_| json!([{"hang": true}]))
        .collect();
    let rec: Vec<Value> = (0..2 * o.recover + 4)
        .map(|_| json!([{"hang": true}]))
        .collect();
    json!({"actors": [
        {"name": "first", "match": "TB-FIRST-", "steps": first},
        {"name": "wake", "match": "TB-WAKE:", "steps": [wake]},
        {"name": "swarm", "match": "TB-SWARM-", "steps": swarm},
        {"name": "idle", "match": "TB-IDLE-", "steps": idle},
        {"name": "ctl", "match": "TB-CTL", "steps": ctl},
        {"name": "rec", "match": "TB-REC-", "steps": rec},
    ]})
}

fn row(out: &mut Vec<[String; 3]>, what: &str, fig: String, n: String) {
    out.push([what.to_string(), fig, n]);
}

fn p5090(v: &Value, unit: &str, digits: usize) -> String {
    let f = |x: &Value| x.as_f64().unwrap_or(f64::NAN);
    format!(
        "p50 {:.*} {unit}, p90 {:.*} {unit}",
        digits,
        f(&v["p50"]),
        digits,
        f(&v["p90"])
    )
}

fn table(r: &Value) -> String {
    let mut rows: Vec<[String; 3]> = vec![];
    let n = |v: &Value| format!("n={}", v["n"]);
    if let Some(f) = r.get("spawn_to_first_event") {
        row(
            &mut rows,
            "1 spawn call returned",
            p5090(&f["spawn_returned_ms"], "ms", 1),
            n(&f["spawn_returned_ms"]),
        );
        row(
            &mut rows,
            "1 spawn -> host running",
            p5090(&f["host_running_ms"], "ms", 0),
            n(&f["host_running_ms"]),
        );
        row(
            &mut rows,
            "1 spawn -> first item",
            p5090(&f["first_item_ms"], "ms", 0),
            n(&f["first_item_ms"]),
        );
        row(
            &mut rows,
            "1 spawn -> completed (incl. 200 ms scripted)",
            p5090(&f["completed_ms"], "ms", 0),
            n(&f["completed_ms"]),
        );
    }
    if let Some(f) = r.get("admission_refusal") {
        row(
            &mut rows,
            "2 refused agents_spawn round trip",
            p5090(&f["round_trip_us"], "us", 0),
            n(&f["round_trip_us"]),
        );
    }
    if let Some(f) = r.get("wait_wakeup") {
        row(
            &mut rows,
            "3 durable change -> agents_wait returned",
            p5090(&f["durable_to_return_ms"], "ms", 2),
            n(&f["durable_to_return_ms"]),
        );
        row(
            &mut rows,
            "3 wait-return spacing minus scripted delay",
            p5090(&f["return_spacing_minus_delay_ms"], "ms", 1),
            n(&f["return_spacing_minus_delay_ms"]),
        );
    }
    if let Some(f) = r.get("idle_rss") {
        row(
            &mut rows,
            "4 RSS per idle host tree",
            p5090(&f["rss_mib_per_host"], "MiB", 1),
            n(&f["rss_mib_per_host"]),
        );
        row(
            &mut rows,
            "4 PSS per idle host tree",
            p5090(&f["pss_mib_per_host"], "MiB", 1),
            n(&f["pss_mib_per_host"]),
        );
        row(
            &mut rows,
            "4 supervisor RSS (with the idle hosts)",
            format!(
                "{:.1} MiB",
                f["supervisor_rss_mib"].as_f64().unwrap_or(f64::NAN)
            ),
            String::new(),
        );
    }
    if let Some(f) = r.get("control") {
        for (key, what) in [
            ("steer_ms", "6 steer: command -> delivered answer"),
            ("pause_ms", "6 pause: command -> paused (host retired)"),
            ("continue_ms", "6 continue: command -> running (admitted)"),
            (
                "continue_to_model_ms",
                "6 continue -> resumed thread's model request",
            ),
        ] {
            row(&mut rows, what, p5090(&f[key], "ms", 1), n(&f[key]));
        }
    }
    if let Some(f) = r.get("recovery") {
        let f2 = |v: &Value| format!("{:.0} ms", v.as_f64().unwrap_or(f64::NAN));
        let k = format!("workers={}", f["workers"]);
        row(
            &mut rows,
            "7 kill -9 -> `resume` returned (recovered, new supervisor)",
            f2(&f["resume_cli_ms"]),
            k.clone(),
        );
        row(
            &mut rows,
            "7 resume -> every worker continued (running)",
            f2(&f["all_continued_ms"]),
            k.clone(),
        );
        row(
            &mut rows,
            "7 resume -> every resumed thread at the model",
            f2(&f["all_at_model_ms"]),
            k,
        );
    }
    if let Some(f) = r.get("concurrent") {
        row(
            &mut rows,
            "5 concurrent: first spawn -> all terminal",
            format!("{:.0} ms", f["wall_ms"].as_f64().unwrap_or(f64::NAN)),
            format!("jobs={} {}", f["jobs"], f["states"]),
        );
        row(
            &mut rows,
            "5 concurrent: per job spawn -> terminal",
            p5090(&f["spawn_to_terminal_ms"], "ms", 0),
            n(&f["spawn_to_terminal_ms"]),
        );
    }
    let f = |v: &Value| format!("{:.0} ms", v.as_f64().unwrap_or(f64::NAN));
    row(
        &mut rows,
        "- `run --detach` (session start)",
        f(&r["session_start_ms"]),
        String::new(),
    );
    row(
        &mut rows,
        "- `agent-mcp` start -> initialize answered",
        f(&r["operator_start_ms"]),
        String::new(),
    );
    row(
        &mut rows,
        "- `inspect --json` process",
        p5090(&r["inspect_cli_ms"], "ms", 0),
        n(&r["inspect_cli_ms"]),
    );
    row(
        &mut rows,
        "- `stop` of the session at the end",
        f(&r["session_stop_ms"]),
        String::new(),
    );
    let w0 = rows.iter().map(|r| r[0].len()).max().unwrap_or(0);
    let w1 = rows.iter().map(|r| r[1].len()).max().unwrap_or(0);
    let mut s = String::new();
    for r in rows {
        s.push_str(&format!("{:<w0$}  {:<w1$}  {}\n", r[0], r[1], r[2]));
    }
    s.push_str(METHOD);
    s
}

const METHOD: &str = "\
Method: every agent is a real `codex app-server` (node + codex.js) and every model answer comes
from scripted-model over loopback SSE, so host figures include node start-up and Codex's own
initialisation; the harness drives one operator `agent-mcp` over stdio (its answers are
timestamped by a reader thread as they arrive).
1: agents_spawn sent -> its answer; -> the first agents_wait answer showing `running` (host up,
   thread started); -> the first answer whose progress_revision moved past that (the worker's
   first agentMessage; the model answers at once). One job at a time.
2: an agents_spawn with a task_kind the role does not allow; admission refuses, no host starts.
3: one worker says a line every --wake-delay-ms (one streamed model answer); the harness is
   blocked in agents_wait before each. Sample = wall clock when the wait's answer arrived - the
   run's updated_at (ms since the epoch, stored with the revision the wait woke on, read with
   agent_inspect right after; dropped if inspect shows a later revision or the change predates
   the wait). updated_at is truncated to whole ms, so samples are high by 0-1 ms. 'spacing' =
   time between consecutive wait answers minus the scripted delay: the whole chain
   model -> Codex -> supervisor -> store -> wait -> client, per line.
4: hanging workers (their model request never finishes), measured once all run and their
   requests reached the model, plus 2 s; VmRSS and PSS summed over each host pid's tree (/proc).
5: N agents_spawn written at once on one connection; a terminal state observed via agents_wait.
6: one worker whose model requests hang; per round: steer, pause and continue, each timed from
   the agent_control call to its answer, and continue -> the resumed thread's next model request.
7: a session of its own with K workers whose model requests hang, all running and at the model;
   kill -9 of its supervisor; timed from `codex-mmo resume` (which recovers the session and
   starts a new supervisor) to its exit, to every worker continued by the operator (inspect +
   continue each), and to every resumed thread's model request.
";

fn main() {
    let o = match parse_opts() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("team-bench: {e}");
            std::process::exit(2);
        }
    };
    match bench(&o) {
        Ok(r) => {
            let t = table(&r);
            if o.json {
                eprint!("{t}");
                println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
            } else {
                print!("{t}");
            }
        }
        Err(e) => {
            eprintln!("team-bench: {e}");
            std::process::exit(1);
        }
    }
}

fn bench(o: &Opts) -> Result<Value, String> {
    let codex_js = std::env::var_os("CODEX_MMO_CODEX_JS")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .ok_or("CODEX_MMO_CODEX_JS must name @openai/codex's bin/codex.js")?;
    let mut w = World::new(o, codex_js.clone())?;
    w.git_workspace()?;
    let sha = sha256_of(&w.ws().join("src/lib.rs"))?;
    let verdict = json!({"verdict": "approve", "findings": [{"relative_path": "src/lib.rs", "sha256": sha, "claim": "adds two numbers"}]}).to_string();
    w.start_model(&o.scripted_model, &script(o, &verdict))?;
    let pack = w.pack(o.swarm)?;
    let t = Instant::now();
    let session = w.start_session(&pack)?;
    let session_start_ms = ms(t.elapsed());
    let t = Instant::now();
    let mut op = w.operator(&session)?;
    let operator_start_ms = ms(t.elapsed());
    let mut r = json!({
        "machine": {"cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
                    "loadavg_at_start": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()},
        "codex_js": codex_js.to_string_lossy(),
        "session_start_ms": session_start_ms,
        "operator_start_ms": operator_start_ms,
    });
    let on = |n: u32| o.only.contains(&n);
    if on(2) {
        eprintln!("[2] admission: {} refused spawns", o.refusals);
        r["admission_refusal"] = admission_refusals(&mut op, o.refusals)?;
    }
    if on(1) {
        eprintln!("[1] spawn -> first worker event, {} runs", o.runs);
        r["spawn_to_first_event"] = spawn_to_first_event(&mut op, o.runs)?;
    }
    if on(3) {
        eprintln!(
            "[3] agents_wait wake-up, {} lines {} ms apart",
            o.wakeups, o.wake_delay_ms
        );
        r["wait_wakeup"] = wait_wakeup(&mut op, o.wakeups, o.wake_delay_ms)?;
    }
    if on(5) {
        eprintln!("[5] {} concurrent workers", o.swarm);
        r["concurrent"] = concurrent(&mut op, o.swarm)?;
    }
    if on(6) {
        eprintln!("[6] live control, {} rounds", o.controls);
        r["control"] = control(&w, &mut op, o.controls)?;
    }
    if on(4) {
        eprintln!("[4] RSS of {} idle hosts", o.idle);
        r["idle_rss"] = idle_rss(&w, &session, &mut op, o.idle)?;
    }
    drop(op);
    let t = Instant::now();
    w.stop(&session)?;
    r["session_stop_ms"] = json!(ms(t.elapsed()));
    // A session of its own: the root's max_active (1) holds across the profile's sessions.
    if on(7) {
        eprintln!("[7] recovery of {} suspended workers", o.recover);
        r["recovery"] = recovery(&mut w, &pack, o.recover)?;
    }
    r["inspect_cli_ms"] = summary(&w.inspect_ms.borrow());
    let reqs = w.model_requests();
    r["model_requests"] = json!(reqs.len());
    r["model_exhausted_or_error"] = json!(
        reqs.iter()
            .filter(|q| q["exhausted"] == true
                || !q["error"].is_null()
                || q.get("status").is_some())
            .count()
    );
    r["loadavg_at_end"] = json!(
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    Ok(r)
}
