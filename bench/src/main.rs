//! `mcp-bench`: measures any stdio MCP server command, so vox and its peers are measured the
//! same way on the same machine.
//!
//! ```text
//! mcp-bench [--runs N] [--calls N] [--tool NAME] [--args JSON] [--setup-tool NAME --setup-args JSON]
//!           [--list-runs N] [--cancel-after-ms M --gone-pattern STR [--cancel-runs N]]
//!           [--before-each SHELL] [--rss-pid-file FILE] [--cwd DIR] -- <server command and args>
//! ```
//!
//! 1. start-up: `--runs` times (default 20, 0 skips it), spawn the command, `initialize` →
//!    `notifications/initialized` → `tools/list`, and time spawn → the `tools/list` answer
//!    (`--before-each` runs a shell command first, e.g. to stop a daemon and measure a cold start);
//! 2. then one session: `--setup-tool` once, then
//!    - `--list-runs N`: N sequential `tools/list`; median/p99 ms until each answer is read
//!      (`tools_list_received`) and until it is also parsed (`tools_list`), and the number of
//!      tools;
//!    - round trip (with `--tool`): `--calls` sequential `tools/call` of `--tool` with `--args`
//!      (default 2000); median, p99 and calls/s;
//!    - cancellation (with `--cancel-after-ms`, instead of the round trip): `--cancel-runs` times
//!      (default 20), send a `tools/call` of `--tool` with `--args` and a `_meta.progressToken`,
//!      wait M ms, send `notifications/cancelled`, then scan `/proc` every 1 ms until no process
//!      whose command line (arguments joined by spaces) contains `--gone-pattern` is left, this
//!      harness and its ancestors aside; p50/p99/max of send-cancel → gone in ms. A run is
//!      reported, not measured, when the call is answered before the cancel, or when nothing
//!      matched or the matches are still there 5 s after the cancel. A response to a cancelled
//!      request within 500 ms of the cancel is counted as a violation (MCP: none is sent).
//!      `{marker}` in `--args` and `--gone-pattern` is replaced by digits unique to the run
//!      (write `30.{marker}` where a number is needed, e.g. `sleep 30.{marker}`);
//! 3. memory: VmRSS of the server process, or of the pid in `--rss-pid-file` (JSON with `pid`).
//!
//! Figures go to stderr as they are measured and as JSON to stdout at the end.
//!
//! ```text
//! mcp-bench --runs 0 --cancel-runs 20 --cancel-after-ms 300 --gone-pattern "sleep 30.{marker}" \
//!   --tool vox_skill_run \
//!   --args '{"id":"memory-notes","command":["sleep","30.{marker}"],"timeout_ms":25000}' \
//!   -- target/release/vox mcp
//! ```

use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const USAGE: &str = "usage: mcp-bench [--runs N] [--calls N] [--tool NAME] [--args JSON] \
[--setup-tool NAME --setup-args JSON] [--list-runs N] \
[--cancel-after-ms M --gone-pattern STR [--cancel-runs N]] [--before-each SHELL] \
[--rss-pid-file FILE] [--cwd DIR] -- <server command and args>";

/// The longest frame read from the server (a `tools/list` of thousands of tools fits).
const MAX_FRAME_BYTES: u64 = 64 << 20;
/// How much of a process's command line is searched for `--gone-pattern`.
const MAX_CMDLINE_BYTES: u64 = 128 << 10;
/// How long a cancelled call's processes may take to go before the run is reported.
const GONE_TIMEOUT: Duration = Duration::from_secs(5);
/// A response to a cancelled request within this long after the cancel is a violation.
const VIOLATION_WINDOW: Duration = Duration::from_millis(500);
const MARKER: &str = "{marker}";

struct Opts {
    runs: usize,
    calls: usize,
    tool: Option<String>,
    args: Value,
    setup_tool: Option<String>,
    setup_args: Value,
    list_runs: usize,
    cancel: Option<CancelOpts>,
    before_each: Option<String>,
    rss_pid_file: Option<String>,
    cwd: Option<String>,
    command: Vec<String>,
}

struct CancelOpts {
    after: Duration,
    runs: usize,
    gone_pattern: String,
}

fn number<T: std::str::FromStr>(name: &str, v: String) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    v.parse()
        .map_err(|e| format!("{name} {v:?}: {e} (a whole number)"))
}

fn parse_opts() -> Result<Opts, String> {
    let mut o = Opts {
        runs: 20,
        calls: 2000,
        tool: None,
        args: json!({}),
        setup_tool: None,
        setup_args: json!({}),
        list_runs: 0,
        cancel: None,
        before_each: None,
        rss_pid_file: None,
        cwd: None,
        command: vec![],
    };
    let mut calls = None;
    let mut cancel_after_ms = None;
    let mut cancel_runs = None;
    let mut gone_pattern = None;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--runs" => o.runs = number(&a, val()?)?,
            "--calls" => calls = Some(number(&a, val()?)?),
            "--tool" => o.tool = Some(val()?),
            "--args" => {
                o.args = serde_json::from_str(&val()?).map_err(|e| format!("--args: {e}"))?;
            }
            "--setup-tool" => o.setup_tool = Some(val()?),
            "--setup-args" => {
                o.setup_args =
                    serde_json::from_str(&val()?).map_err(|e| format!("--setup-args: {e}"))?;
            }
            "--list-runs" => o.list_runs = number(&a, val()?)?,
            "--cancel-after-ms" => cancel_after_ms = Some(number(&a, val()?)?),
            "--cancel-runs" => cancel_runs = Some(number(&a, val()?)?),
            "--gone-pattern" => gone_pattern = Some(val()?),
            "--before-each" => o.before_each = Some(val()?),
            "--rss-pid-file" => o.rss_pid_file = Some(val()?),
            "--cwd" => o.cwd = Some(val()?),
            "--" => {
                o.command = it.by_ref().collect();
                break;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.command.is_empty() {
        return Err("give the server command after --".into());
    }
    if calls.is_some() && o.tool.is_none() {
        return Err("--calls needs --tool".into());
    }
    o.calls = calls.unwrap_or(o.calls);
    match (cancel_after_ms, gone_pattern) {
        (Some(ms), Some(pattern)) => {
            if o.tool.is_none() {
                return Err("--cancel-after-ms needs --tool (the call to cancel)".into());
            }
            if calls.is_some() {
                return Err("--calls and --cancel-after-ms are separate modes: give one".into());
            }
            if pattern.is_empty() {
                return Err("--gone-pattern is empty (it would match every process)".into());
            }
            if pattern.contains(MARKER) && !o.args.to_string().contains(MARKER) {
                return Err(format!(
                    "--gone-pattern has {MARKER} but --args does not: nothing would match"
                ));
            }
            let runs = cancel_runs.unwrap_or(20);
            if !(1..=99_999).contains(&runs) {
                return Err("--cancel-runs must be 1 to 99999".into());
            }
            o.cancel = Some(CancelOpts {
                after: Duration::from_millis(ms),
                runs,
                gone_pattern: pattern,
            });
        }
        (Some(_), None) => return Err("--cancel-after-ms needs --gone-pattern".into()),
        (None, Some(_)) => return Err("--gone-pattern needs --cancel-after-ms".into()),
        (None, None) if cancel_runs.is_some() => {
            return Err("--cancel-runs needs --cancel-after-ms and --gone-pattern".into());
        }
        (None, None) => {}
    }
    Ok(o)
}

struct Session {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
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
        // Large enough that a big answer (a list of thousands of tools) is read in few calls.
        let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().ok_or("no stdout")?);
        Ok(Session {
            child,
            stdin,
            stdout,
            line: String::new(),
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
    /// Sends a request without waiting for its answer; returns its id.
    fn start_request(&mut self, method: &str, params: Value) -> Result<u64, String> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        Ok(id)
    }
    /// The next frame from the server, waiting as long as it takes.
    fn read_frame(&mut self) -> Result<Value, String> {
        Ok(self.read_frame_timed(Instant::now())?.1)
    }
    /// The next frame, and the time from `since` until its last byte was read.
    fn read_frame_timed(&mut self, since: Instant) -> Result<(Duration, Value), String> {
        self.line.clear();
        let n = (&mut self.stdout)
            .take(MAX_FRAME_BYTES)
            .read_line(&mut self.line)
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("server closed stdout".into());
        }
        if n as u64 == MAX_FRAME_BYTES && !self.line.ends_with('\n') {
            return Err(format!("server sent a frame over {MAX_FRAME_BYTES} bytes"));
        }
        let at = since.elapsed();
        let v = serde_json::from_str(&self.line).map_err(|e| format!("bad frame: {e}"))?;
        Ok((at, v))
    }
    /// Reads frames until `until` (at least those already there), handing each to `stop`;
    /// returns true as soon as `stop` does.
    fn frames_until(
        &mut self,
        until: Instant,
        mut stop: impl FnMut(&Value) -> bool,
    ) -> Result<bool, String> {
        loop {
            let left = until.saturating_duration_since(Instant::now());
            // A frame already buffered needs no wait; else wait for the pipe (rounded up to
            // whole ms, the unit of poll). A frame started is read to its end.
            if self.stdout.buffer().is_empty() && !self.readable_within(left)? {
                if left.is_zero() {
                    return Ok(false);
                }
                continue;
            }
            let frame = self.read_frame()?;
            if stop(&frame) {
                return Ok(true);
            }
        }
    }
    fn readable_within(&self, timeout: Duration) -> Result<bool, String> {
        let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
        let mut fd = libc::pollfd {
            fd: self.stdout.get_ref().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, owned by this frame, for the duration of the call.
        let n = unsafe { libc::poll(&mut fd, 1, ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(format!("poll: {e}"));
        }
        Ok(n > 0)
    }
    fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        Ok(self.request_timed(method, params, Instant::now())?.1)
    }
    /// A request's result, and the time from `since` until its answer's last byte was read.
    fn request_timed(
        &mut self,
        method: &str,
        params: Value,
        since: Instant,
    ) -> Result<(Duration, Value), String> {
        let id = self.start_request(method, params)?;
        loop {
            let (at, mut v) = self
                .read_frame_timed(since)
                .map_err(|e| format!("{method}: {e}"))?;
            if response_id(&v) == Some(id) {
                if let Some(e) = v.get("error") {
                    return Err(format!("{method}: {e}"));
                }
                // Taken, not cloned: a list of thousands of tools is megabytes.
                return Ok((at, v["result"].take()));
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

/// The id of a response (a frame with `result` or `error`), not of a request from the server.
fn response_id(frame: &Value) -> Option<u64> {
    if frame.get("method").is_some() {
        return None;
    }
    frame.get("id").and_then(Value::as_u64)
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

/// Like [`summary`], for measures in milliseconds: p50 (the median), p99 and max.
fn summary_ms(name: &str, mut samples_ms: Vec<f64>) -> Value {
    samples_ms.sort_by(f64::total_cmp);
    let (p50, p99) = (percentile(&samples_ms, 0.5), percentile(&samples_ms, 0.99));
    let max = samples_ms.last().copied().unwrap_or(f64::NAN);
    if samples_ms.is_empty() {
        eprintln!("{name:<28} n=0      nothing measured");
    } else {
        eprintln!(
            "{name:<28} n={:<6} p50 {p50:>10.3} ms  p99 {p99:>10.3} ms  max {max:>10.3} ms",
            samples_ms.len()
        );
    }
    json!({"measure": name, "n": samples_ms.len(), "p50_ms": p50, "p99_ms": p99, "max_ms": max})
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Finds processes by command line in `/proc`, leaving out this harness and its ancestors
/// (whose command lines hold the pattern too, e.g. a `timeout` or `sh -c` around it).
struct ProcScan {
    exclude: HashSet<u32>,
    buf: Vec<u8>,
}

impl ProcScan {
    fn new() -> Self {
        let mut exclude = HashSet::new();
        let mut pid = std::process::id();
        while pid > 1 && exclude.insert(pid) {
            pid = parent_pid(pid).unwrap_or(0);
        }
        ProcScan {
            exclude,
            buf: Vec::new(),
        }
    }
    /// Whether a process whose arguments, joined by spaces, contain `pattern` is running.
    /// A process that has exited but is not yet reaped has an empty command line: it is gone.
    fn any_running(&mut self, pattern: &str) -> Result<bool, String> {
        let pattern = pattern.as_bytes();
        let dir = std::fs::read_dir("/proc").map_err(|e| format!("/proc: {e}"))?;
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if self.exclude.contains(&pid) {
                continue;
            }
            let Ok(file) = std::fs::File::open(entry.path().join("cmdline")) else {
                continue; // exited meanwhile
            };
            self.buf.clear();
            if file
                .take(MAX_CMDLINE_BYTES)
                .read_to_end(&mut self.buf)
                .is_err()
            {
                continue;
            }
            for b in &mut self.buf {
                if *b == 0 {
                    *b = b' ';
                }
            }
            if self.buf.windows(pattern.len()).any(|w| w == pattern) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

fn parent_pid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // pid (comm) state ppid ...; comm may hold spaces and parentheses, so split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

enum CancelRun {
    /// The answer came before the cancel was due: with the error, if it was one.
    AnsweredBeforeCancel(Option<String>),
    Gone(Duration),
    NeverMatched,
    StillRunning,
}

/// Responses that came for cancelled requests.
#[derive(Default)]
struct Cancelled {
    at: HashMap<u64, Instant>,
    violations: usize,
    late: usize,
}

impl Cancelled {
    fn note(&mut self, frame: &Value) {
        if let Some(at) = response_id(frame).and_then(|id| self.at.remove(&id)) {
            if at.elapsed() <= VIOLATION_WINDOW {
                self.violations += 1;
            } else {
                self.late += 1;
            }
        }
    }
}

fn cancel_run(
    s: &mut Session,
    tool: &str,
    args: &Value,
    c: &CancelOpts,
    run: usize,
    scan: &mut ProcScan,
    cancelled: &mut Cancelled,
) -> Result<CancelRun, String> {
    let marker = format!("{:07}{run:05}", std::process::id());
    let args = args.to_string().replace(MARKER, &marker);
    let args: Value =
        serde_json::from_str(&args).map_err(|e| format!("--args with marker: {e}"))?;
    let pattern = c.gone_pattern.replace(MARKER, &marker);
    let id = s.start_request(
        "tools/call",
        json!({"name": tool, "arguments": args, "_meta": {"progressToken": format!("mcp-bench-cancel-{run}")}}),
    )?;
    let mut answer = None;
    let mut answers = |f: &Value| {
        cancelled.note(f);
        let done = response_id(f) == Some(id);
        if done {
            answer = Some(f.clone());
        }
        done
    };
    // Wait, then scan, then take what came meanwhile: an answer read here came before the cancel.
    let mut seen = false;
    if !s.frames_until(Instant::now() + c.after, &mut answers)? {
        seen = scan.any_running(&pattern)?;
        s.frames_until(Instant::now(), &mut answers)?;
    }
    if let Some(a) = answer {
        let failed = a.get("error").is_some() || a["result"]["isError"] == json!(true);
        return Ok(CancelRun::AnsweredBeforeCancel(
            failed.then(|| a.to_string()),
        ));
    }
    let sent = Instant::now();
    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "bench"}}),
    )?;
    cancelled.at.insert(id, sent);
    let outcome = loop {
        if scan.any_running(&pattern)? {
            seen = true;
        } else if seen {
            break CancelRun::Gone(sent.elapsed());
        }
        if sent.elapsed() >= GONE_TIMEOUT {
            break if seen {
                CancelRun::StillRunning
            } else {
                CancelRun::NeverMatched
            };
        }
        s.frames_until(Instant::now() + Duration::from_millis(1), |f| {
            cancelled.note(f);
            false
        })?;
    };
    // Keep reading until the violation window of this cancel closes.
    s.frames_until(sent + VIOLATION_WINDOW, |f| {
        cancelled.note(f);
        false
    })?;
    Ok(outcome)
}

fn cancel_mode(s: &mut Session, tool: &str, args: &Value, c: &CancelOpts) -> Result<Value, String> {
    let mut scan = ProcScan::new();
    let mut cancelled = Cancelled::default();
    let (mut gone, mut answered, mut never, mut still) = (vec![], 0, 0, 0);
    for run in 0..c.runs {
        let what = match cancel_run(s, tool, args, c, run, &mut scan, &mut cancelled)? {
            CancelRun::Gone(d) => {
                gone.push(ms(d));
                format!("gone {:.3} ms after cancel", ms(d))
            }
            CancelRun::AnsweredBeforeCancel(error) => {
                answered += 1;
                let error = error
                    .map(|e| format!(", an error: {e}"))
                    .unwrap_or_default();
                format!(
                    "answered before cancel (due at {} ms){error}",
                    c.after.as_millis()
                )
            }
            CancelRun::NeverMatched => {
                never += 1;
                format!(
                    "no process matched the pattern in {} s",
                    GONE_TIMEOUT.as_secs()
                )
            }
            CancelRun::StillRunning => {
                still += 1;
                format!("still running {} s after cancel", GONE_TIMEOUT.as_secs())
            }
        };
        eprintln!("cancel run {:<5} {what}", run + 1);
    }
    let mut v = summary_ms("cancel_to_gone", gone);
    eprintln!(
        "{:<28} answered before cancel {answered}, never matched {never}, still running {still}; \
         answers to cancelled calls within {} ms: {} (violations), later: {}",
        "",
        VIOLATION_WINDOW.as_millis(),
        cancelled.violations,
        cancelled.late
    );
    v["runs"] = json!(c.runs);
    v["answered_before_cancel"] = json!(answered);
    v["never_matched"] = json!(never);
    v["still_running_after_timeout"] = json!(still);
    v["violations"] = json!(cancelled.violations);
    v["late_answers"] = json!(cancelled.late);
    Ok(v)
}

fn run(o: &Opts) -> Result<(), String> {
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
        let mut s = Session::spawn(o)?;
        s.initialize()?;
        let listed = s.request("tools/list", json!({}))?;
        startup.push(t.elapsed().as_secs_f64() * 1e6);
        if listed["tools"].as_array().is_none() {
            return Err("tools/list returned no tools array".into());
        }
        s.close();
    }
    if o.runs > 0 {
        report.push(summary("start_to_first_tools_list", startup));
    }

    let mut s = Session::spawn(o)?;
    s.initialize()?;
    if let Some(setup) = &o.setup_tool {
        s.request(
            "tools/call",
            json!({"name": setup, "arguments": o.setup_args}),
        )?;
    }
    if o.list_runs > 0 {
        // Two figures per list: until the answer's last byte is read (the server's latency),
        // and until this harness has also parsed it (serde_json into a Value).
        let mut received = Vec::with_capacity(o.list_runs);
        let mut times = Vec::with_capacity(o.list_runs);
        let mut listed = Value::Null;
        for _ in 0..o.list_runs {
            let t = Instant::now();
            let (at, answer) = s.request_timed("tools/list", json!({}), t)?;
            times.push(ms(t.elapsed()));
            received.push(ms(at));
            listed = answer;
        }
        report.push(summary_ms("tools_list_received", received));
        let tools = listed["tools"]
            .as_array()
            .ok_or("tools/list returned no tools array")?
            .len();
        let mut v = summary_ms("tools_list", times);
        let paged = listed.get("nextCursor").is_some_and(|c| !c.is_null());
        eprintln!(
            "{:<28} {tools} tools in the answer{}",
            "",
            if paged {
                " (a first page: nextCursor set)"
            } else {
                ""
            }
        );
        v["tools"] = json!(tools);
        v["paginated"] = json!(paged);
        report.push(v);
    }
    match (&o.tool, &o.cancel) {
        (Some(tool), Some(c)) => report.push(cancel_mode(&mut s, tool, &o.args, c)?),
        (Some(tool), None) => {
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
        (None, _) => {}
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
    let o = match parse_opts() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("mcp-bench: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&o) {
        eprintln!("mcp-bench: {e}");
        std::process::exit(1);
    }
}
