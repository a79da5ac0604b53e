//! An async client for the real Codex `app-server`: JSON-RPC 2.0, one JSON message per line
//! on the child's stdin/stdout.
//!
//! The child runs in a process group of its own; [`AppServer::shutdown`] and `Drop` end that
//! group and every descendant (MCP servers, shell commands), so nothing is left behind.
//! Lines from the child are untrusted: each is bounded ([`SpawnOptions::max_line_bytes`]) and
//! anything that is not a JSON-RPC message becomes an [`Event::Malformed`], never a panic.
//!
//! ```no_run
//! # async fn run() -> Result<(), codex_app_server::Error> {
//! use codex_app_server::*;
//! let opts = SpawnOptions::new(find_codex()?, "/tmp/codex-home").config("approval_policy=\"never\"");
//! let server = AppServer::spawn(opts)?;
//! let mut events = server.events().expect("taken once");
//! server.initialize(&InitializeParams::default()).await?;
//! let thread = server.thread_start(&ThreadStartParams::default()).await?;
//! let _turn = server.turn_start(&thread, "hello", None).await?;
//! events.wait_notification("turn/completed", std::time::Duration::from_secs(60)).await?;
//! server.shutdown().await;
//! # Ok(()) }
//! ```

mod command;
pub mod tree;
mod types;

pub use command::{CODEX_JS_VAR, CodexCommand, find_codex};
pub use types::*;

use serde_json::{Value, json};
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::ChildStdin;
use tokio::sync::{mpsc, oneshot, watch};

/// A line longer than this is dropped (and reported) unless the options say otherwise.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Why talking to the app-server failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Neither `CODEX_MMO_CODEX_JS` nor `codex` on `PATH` gives a Codex to run (why).
    #[error("no Codex to run: {0}")]
    CodexNotFound(String),
    /// The child process could not be started.
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        /// The program that was run (`node` or `codex`).
        program: String,
        /// The error from spawning it.
        source: std::io::Error,
    },
    /// Writing to the child's stdin (or reading its output) failed.
    #[error("I/O with the app-server: {0}")]
    Io(#[from] std::io::Error),
    /// The server answered the request with a JSON-RPC error.
    #[error("app-server error {code}: {message}")]
    Rpc {
        /// The JSON-RPC error code.
        code: i64,
        /// The error's message.
        message: String,
        /// The error's `data`, when it has one.
        data: Option<Value>,
    },
    /// No answer (or awaited notification) came in time.
    #[error("{what}: nothing within {after:?}")]
    Timeout {
        /// What was awaited, e.g. a request's method or a notification's.
        what: String,
        /// How long it was awaited.
        after: Duration,
    },
    /// The server's output ended (it exited or closed stdout) before the answer came.
    #[error("the app-server's output is closed (the process exited or is exiting)")]
    Closed,
    /// An answer that does not have the shape the schema gives it.
    #[error("unexpected answer to {method}: {detail}")]
    Unexpected {
        /// The request's method.
        method: String,
        /// What did not match the schema.
        detail: String,
    },
}

/// What the server sends that is not an answer to one of our requests.
#[derive(Debug, Clone)]
pub enum Event {
    /// A JSON-RPC notification (`turn/completed`, `item/started`, ...).
    Notification {
        /// The notification's method.
        method: String,
        /// Its params (`null` when it has none).
        params: Value,
    },
    /// A server→client request (approvals, elicitation, ...): answer it with
    /// [`AppServer::respond`] or [`AppServer::respond_error`].
    ServerRequest {
        /// The request's id, to answer it with.
        id: RequestId,
        /// The request's method (an approval, an elicitation, ...).
        method: String,
        /// Its params (`null` when it has none).
        params: Value,
    },
    /// A line that was dropped: too long, not JSON, or not a JSON-RPC message.
    Malformed {
        /// Why the line was dropped, followed by the start of the line (at most 400 bytes).
        error: String,
    },
    /// The process exited (after its output ended); `None` if its status could not be read.
    /// Always the last event.
    Exited {
        /// The exit status, if it could be read.
        status: Option<ExitStatus>,
    },
}

impl Event {
    /// The notification's params when this is notification `method`.
    pub fn notification(&self, method: &str) -> Option<&Value> {
        match self {
            Event::Notification { method: m, params } if m == method => Some(params),
            _ => None,
        }
    }
}

/// How to start the app-server.
#[derive(Debug, Clone)]
pub struct SpawnOptions {
    /// Which Codex to run ([`find_codex`] picks one).
    pub command: CodexCommand,
    /// `CODEX_HOME` of the child.
    pub codex_home: PathBuf,
    /// The child's working directory; `None` inherits ours.
    pub cwd: Option<PathBuf>,
    /// Added to the inherited environment.
    pub env: Vec<(OsString, OsString)>,
    /// Each is passed as `-c <key=value>` (the value is TOML).
    pub config: Vec<String>,
    /// Further arguments after `app-server` (e.g. `--enable <feature>`).
    pub extra_args: Vec<OsString>,
    /// The child's stderr is appended to this file; `None` discards it.
    pub stderr_log: Option<PathBuf>,
    /// Default timeout of [`AppServer::request`].
    pub request_timeout: Duration,
    /// How long [`AppServer::shutdown`] waits after SIGTERM before SIGKILL.
    pub shutdown_grace: Duration,
    /// Longest line accepted from the child, in bytes; a longer one is dropped as
    /// [`Event::Malformed`].
    pub max_line_bytes: usize,
}

impl SpawnOptions {
    /// Options for `command` with `CODEX_HOME=codex_home` and the defaults: 120 s request timeout,
    /// 3 s shutdown grace, [`DEFAULT_MAX_LINE_BYTES`].
    pub fn new(command: CodexCommand, codex_home: impl Into<PathBuf>) -> Self {
        SpawnOptions {
            command,
            codex_home: codex_home.into(),
            cwd: None,
            env: vec![],
            config: vec![],
            extra_args: vec![],
            stderr_log: None,
            request_timeout: Duration::from_secs(120),
            shutdown_grace: Duration::from_secs(3),
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        }
    }
    /// Runs the child in `dir`.
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }
    /// Adds `key=value` to the child's environment.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }
    /// One `-c key=value` override, e.g. `config("approval_policy=\"never\"")`.
    pub fn config(mut self, key_value: impl Into<String>) -> Self {
        self.config.push(key_value.into());
        self
    }
    /// Appends one argument after `app-server`.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.extra_args.push(arg.into());
        self
    }
    /// Appends the child's stderr to the file at `path`.
    pub fn stderr_log(mut self, path: impl Into<PathBuf>) -> Self {
        self.stderr_log = Some(path.into());
        self
    }
    /// Sets the default timeout of [`AppServer::request`].
    pub fn request_timeout(mut self, t: Duration) -> Self {
        self.request_timeout = t;
        self
    }
    /// Sets how long [`AppServer::shutdown`] waits after SIGTERM before SIGKILL.
    pub fn shutdown_grace(mut self, t: Duration) -> Self {
        self.shutdown_grace = t;
        self
    }
    /// Sets the longest line accepted from the child, in bytes.
    pub fn max_line_bytes(mut self, n: usize) -> Self {
        self.max_line_bytes = n;
        self
    }
}

type Reply = oneshot::Sender<Result<Value, Error>>;

#[derive(Default)]
struct Pending {
    closed: bool,
    waiting: HashMap<i64, Reply>,
}

/// The server→client messages that are not answers; see [`Event`].
pub struct Events {
    rx: mpsc::UnboundedReceiver<Event>,
}

impl Events {
    /// The next event; `None` after [`Event::Exited`] has been received.
    pub async fn recv(&mut self) -> Option<Event> {
        self.rx.recv().await
    }

    /// The next event, without waiting.
    pub fn try_recv(&mut self) -> Option<Event> {
        self.rx.try_recv().ok()
    }

    /// Skips events until `pred` accepts one, which is returned. Fails on timeout, and with
    /// [`Error::Closed`] when the process exits first (unless `pred` accepts the exit).
    pub async fn wait_for(
        &mut self,
        timeout: Duration,
        mut pred: impl FnMut(&Event) -> bool,
    ) -> Result<Event, Error> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let e = tokio::time::timeout_at(deadline, self.rx.recv())
                .await
                .map_err(|_| Error::Timeout {
                    what: "waiting for an app-server event".into(),
                    after: timeout,
                })?;
            match e {
                None => return Err(Error::Closed),
                Some(e) if pred(&e) => return Ok(e),
                Some(Event::Exited { .. }) => return Err(Error::Closed),
                Some(_) => {}
            }
        }
    }

    /// Waits for notification `method` and returns its params.
    pub async fn wait_notification(
        &mut self,
        method: &str,
        timeout: Duration,
    ) -> Result<Value, Error> {
        match self
            .wait_for(timeout, |e| e.notification(method).is_some())
            .await
        {
            Ok(Event::Notification { params, .. }) => Ok(params),
            Ok(_) => unreachable!("the predicate accepts only this notification"),
            Err(Error::Timeout { after, .. }) => Err(Error::Timeout {
                what: format!("waiting for {method}"),
                after,
            }),
            Err(e) => Err(e),
        }
    }
}

/// A running `codex app-server` process and the connection to it.
pub struct AppServer {
    pid: u32,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pending: Arc<Mutex<Pending>>,
    next_id: AtomicI64,
    events: Mutex<Option<Events>>,
    exit: watch::Receiver<Option<Option<ExitStatus>>>,
    request_timeout: Duration,
    shutdown_grace: Duration,
    /// Set once shutdown saw the process exit: Drop then has no group to end.
    ended: AtomicBool,
}

impl AppServer {
    /// Starts `<command> app-server [-c ...] [extra args]` in a new process group. Must be
    /// called within a tokio runtime.
    pub fn spawn(opts: SpawnOptions) -> Result<AppServer, Error> {
        let mut cmd = tokio::process::Command::new(&opts.command.program);
        cmd.args(&opts.command.args).arg("app-server");
        for c in &opts.config {
            cmd.arg("-c").arg(c);
        }
        cmd.args(&opts.extra_args)
            .env("CODEX_HOME", &opts.codex_home)
            .envs(opts.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(dir) = &opts.cwd {
            cmd.current_dir(dir);
        }
        let spawn_err = |source: std::io::Error| Error::Spawn {
            program: opts.command.program.display().to_string(),
            source,
        };
        match &opts.stderr_log {
            Some(path) => {
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(spawn_err)?;
                cmd.stderr(Stdio::from(f));
            }
            None => {
                cmd.stderr(Stdio::null());
            }
        }
        let mut child = cmd.spawn().map_err(spawn_err)?;
        let pid = child.id().expect("a child just spawned has a pid");
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");

        let (exit_tx, exit_rx) = watch::channel(None);
        tokio::spawn(async move {
            let status = child.wait().await.ok();
            let _ = exit_tx.send(Some(status));
        });

        let pending = Arc::new(Mutex::new(Pending::default()));
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        tokio::spawn(read_loop(
            stdout,
            pending.clone(),
            events_tx,
            opts.max_line_bytes,
            exit_rx.clone(),
        ));

        Ok(AppServer {
            pid,
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            pending,
            next_id: AtomicI64::new(1),
            events: Mutex::new(Some(Events { rx: events_rx })),
            exit: exit_rx,
            request_timeout: opts.request_timeout,
            shutdown_grace: opts.shutdown_grace,
            ended: AtomicBool::new(false),
        })
    }

    /// The child's pid, which is also its process group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The event receiver; `Some` the first time only.
    pub fn events(&self) -> Option<Events> {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// The exit status once the process has exited.
    pub fn try_exit_status(&self) -> Option<Option<ExitStatus>> {
        *self.exit.borrow()
    }

    async fn write(&self, msg: &Value) -> Result<(), Error> {
        let mut line = serde_json::to_string(msg).expect("a Value serializes");
        line.push('\n');
        let mut guard = self.stdin.lock().await;
        let stdin = guard.as_mut().ok_or(Error::Closed)?;
        stdin.write_all(line.as_bytes()).await?;
        stdin.flush().await?;
        Ok(())
    }

    /// Sends request `method` and waits (the default timeout) for its answer.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, Error> {
        self.request_with_timeout(method, params, self.request_timeout)
            .await
    }

    /// Sends request `method` and waits up to `timeout` for its answer. `Value::Null` params
    /// are omitted.
    pub async fn request_with_timeout(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, Error> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if p.closed {
                return Err(Error::Closed);
            }
            p.waiting.insert(id, tx);
        }
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            msg["params"] = params;
        }
        if let Err(e) = self.write(&msg).await {
            self.forget(id);
            return Err(e);
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => {
                self.forget(id);
                Err(Error::Timeout {
                    what: format!("answer to {method}"),
                    after: timeout,
                })
            }
        }
    }

    fn forget(&self, id: i64) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .waiting
            .remove(&id);
    }

    /// Sends notification `method` (`Value::Null` params are omitted).
    pub async fn notify(&self, method: &str, params: Value) -> Result<(), Error> {
        let mut msg = json!({"jsonrpc": "2.0", "method": method});
        if !params.is_null() {
            msg["params"] = params;
        }
        self.write(&msg).await
    }

    /// Answers server request `id`.
    pub async fn respond(&self, id: &RequestId, result: Value) -> Result<(), Error> {
        self.write(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await
    }

    /// Answers server request `id` with a JSON-RPC error.
    pub async fn respond_error(
        &self,
        id: &RequestId,
        code: i64,
        message: &str,
    ) -> Result<(), Error> {
        self.write(&json!({"jsonrpc": "2.0", "id": id,
                           "error": {"code": code, "message": message}}))
            .await
    }

    /// `initialize`, then the `initialized` notification; returns the server's answer
    /// (`InitializeResponse`: `codexHome`, `platformFamily`, `platformOs`, `userAgent`).
    pub async fn initialize(&self, params: &InitializeParams) -> Result<Value, Error> {
        let answer = self.request("initialize", to_value(params)).await?;
        self.notify("initialized", Value::Null).await?;
        Ok(answer)
    }

    /// `thread/start`; returns the new thread's id (`thread.id`).
    pub async fn thread_start(&self, params: &ThreadStartParams) -> Result<String, Error> {
        let r = self.request("thread/start", to_value(params)).await?;
        string_at(&r, "/thread/id", "thread/start")
    }

    /// `thread/read` without turns: the thread's metadata (`Thread`: `parentThreadId`,
    /// `agentRole`, `agentNickname`, ...), e.g. of a sub-agent thread Codex spawned.
    pub async fn thread_read(&self, thread_id: &str) -> Result<Value, Error> {
        let r = self
            .request(
                "thread/read",
                json!({"threadId": thread_id, "includeTurns": false}),
            )
            .await?;
        r.get("thread")
            .filter(|t| t.is_object())
            .cloned()
            .ok_or_else(|| Error::Unexpected {
                method: "thread/read".into(),
                detail: "no `thread` object".into(),
            })
    }

    /// `turn/start` with one text input; returns the turn's id (`turn.id`).
    pub async fn turn_start(
        &self,
        thread_id: &str,
        text: &str,
        output_schema: Option<Value>,
    ) -> Result<String, Error> {
        let mut p = TurnStartParams::text(thread_id, text);
        p.output_schema = output_schema;
        self.turn_start_with(&p).await
    }

    /// `turn/start` with all its parameters; returns the turn's id.
    pub async fn turn_start_with(&self, params: &TurnStartParams) -> Result<String, Error> {
        let r = self.request("turn/start", to_value(params)).await?;
        string_at(&r, "/turn/id", "turn/start")
    }

    /// `turn/interrupt`. The turn then ends with `turn/completed`, status `interrupted`.
    pub async fn turn_interrupt(&self, thread_id: &str, turn_id: &str) -> Result<(), Error> {
        let p = TurnInterruptParams {
            thread_id: thread_id.into(),
            turn_id: turn_id.into(),
        };
        self.request("turn/interrupt", to_value(&p)).await?;
        Ok(())
    }

    /// `thread/goal/set`; returns the goal as stored.
    pub async fn thread_goal_set(&self, params: &ThreadGoalSetParams) -> Result<ThreadGoal, Error> {
        let r = self.request("thread/goal/set", to_value(params)).await?;
        decode_at(&r, "/goal", "thread/goal/set")
    }

    /// `thread/goal/get`; `None` when the thread has no goal.
    pub async fn thread_goal_get(&self, thread_id: &str) -> Result<Option<ThreadGoal>, Error> {
        let r = self
            .request("thread/goal/get", json!({"threadId": thread_id}))
            .await?;
        match r.get("goal") {
            None | Some(Value::Null) => Ok(None),
            Some(_) => decode_at(&r, "/goal", "thread/goal/get").map(Some),
        }
    }

    /// `thread/goal/clear`; whether there was a goal to clear.
    pub async fn thread_goal_clear(&self, thread_id: &str) -> Result<bool, Error> {
        let r = self
            .request("thread/goal/clear", json!({"threadId": thread_id}))
            .await?;
        decode_at(&r, "/cleared", "thread/goal/clear")
    }

    /// Ends the process: closes its stdin, sends SIGTERM to its group and descendants, waits
    /// up to the grace period, then SIGKILLs whatever is left, and waits (briefly) until the
    /// group is gone. Returns the exit status, `None` if it could not be read.
    pub async fn shutdown(&self) -> Option<ExitStatus> {
        self.stdin.lock().await.take();
        let pgid = self.pid as i32;
        let mut known = tree::descendants(pgid);
        tree::signal(pgid, &known, libc::SIGTERM);
        let mut exit = self.exit.clone();
        let _ = tokio::time::timeout(self.shutdown_grace, exit.wait_for(|s| s.is_some())).await;
        for p in tree::descendants(pgid) {
            if !known.contains(&p) {
                known.push(p);
            }
        }
        let alive: Vec<i32> = known.into_iter().filter(|&p| tree::is_alive(p)).collect();
        tree::signal(pgid, &alive, libc::SIGKILL);
        let status = tokio::time::timeout(Duration::from_secs(5), exit.wait_for(|s| s.is_some()))
            .await
            .ok()
            .and_then(|s| s.ok().and_then(|s| (*s).flatten()));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while tokio::time::Instant::now() < deadline
            && (!tree::group_members(pgid).is_empty() || alive.iter().any(|&p| tree::is_alive(p)))
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if self.exit.borrow().is_some() {
            self.ended.store(true, Ordering::SeqCst);
        }
        status
    }
}

impl Drop for AppServer {
    fn drop(&mut self) {
        if self.ended.load(Ordering::SeqCst) {
            return;
        }
        let pgid = self.pid as i32;
        let desc = tree::descendants(pgid);
        tree::signal(pgid, &desc, libc::SIGKILL);
    }
}

fn to_value(v: &impl serde::Serialize) -> Value {
    serde_json::to_value(v).expect("params serialize")
}

fn string_at(v: &Value, pointer: &str, method: &str) -> Result<String, Error> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| Error::Unexpected {
            method: method.into(),
            detail: format!("no string at {pointer} in {}", truncate(&v.to_string())),
        })
}

fn decode_at<T: serde::de::DeserializeOwned>(
    v: &Value,
    pointer: &str,
    method: &str,
) -> Result<T, Error> {
    let at = v.pointer(pointer).cloned().unwrap_or(Value::Null);
    serde_json::from_value(at).map_err(|e| Error::Unexpected {
        method: method.into(),
        detail: format!("{pointer}: {e} in {}", truncate(&v.to_string())),
    })
}

fn truncate(s: &str) -> String {
    const MAX: usize = 300;
    if s.len() <= MAX {
        return s.to_owned();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

enum Line {
    Eof,
    Complete,
    TooLong(usize),
}

/// Reads one `\n`-terminated line into `buf` (without the newline), never holding more than
/// `max` bytes: a longer line is consumed and reported as `TooLong` with its length.
async fn read_line_bounded<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    buf.clear();
    let mut len = 0usize;
    let mut too_long = false;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(if len == 0 {
                Line::Eof
            } else if too_long {
                Line::TooLong(len)
            } else {
                Line::Complete
            });
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        len += take;
        if !too_long && len <= max {
            buf.extend_from_slice(&chunk[..take]);
        } else if !too_long {
            too_long = true;
            buf.clear();
            buf.shrink_to(64 * 1024);
        }
        r.consume(if done { take + 1 } else { take });
        if done {
            return Ok(if too_long {
                Line::TooLong(len)
            } else {
                Line::Complete
            });
        }
    }
}

async fn read_loop<R: AsyncRead + Unpin>(
    stdout: R,
    pending: Arc<Mutex<Pending>>,
    events: mpsc::UnboundedSender<Event>,
    max_line: usize,
    mut exit: watch::Receiver<Option<Option<ExitStatus>>>,
) {
    let mut r = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    loop {
        match read_line_bounded(&mut r, &mut line, max_line).await {
            Ok(Line::Eof) => break,
            Ok(Line::TooLong(n)) => {
                let _ = events.send(Event::Malformed {
                    error: format!("dropped a line of {n} bytes (the limit is {max_line})"),
                });
            }
            Ok(Line::Complete) => {
                if let Some(e) = dispatch(&line, &pending) {
                    let _ = events.send(e);
                }
            }
            Err(e) => {
                let _ = events.send(Event::Malformed {
                    error: format!("reading the app-server's stdout: {e}"),
                });
                break;
            }
        }
    }
    let waiting = {
        let mut p = pending.lock().unwrap_or_else(|e| e.into_inner());
        p.closed = true;
        std::mem::take(&mut p.waiting)
    };
    for (_, reply) in waiting {
        let _ = reply.send(Err(Error::Closed));
    }
    let status = exit
        .wait_for(|s| s.is_some())
        .await
        .ok()
        .and_then(|s| (*s).flatten());
    let _ = events.send(Event::Exited { status });
}

/// Routes one line: an answer goes to its waiting request; anything else becomes an event.
fn dispatch(line: &[u8], pending: &Mutex<Pending>) -> Option<Event> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let malformed = |why: String| {
        Some(Event::Malformed {
            error: format!(
                "{why}: {}",
                truncate(&String::from_utf8_lossy(&line[..line.len().min(400)]))
            ),
        })
    };
    let mut v: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => return malformed(format!("not JSON ({e})")),
    };
    let Some(obj) = v.as_object_mut() else {
        return malformed("not a JSON-RPC object".into());
    };
    let id = obj.remove("id").filter(|i| !i.is_null());
    if let Some(method) = obj.get("method").and_then(Value::as_str).map(str::to_owned) {
        let params = obj.remove("params").unwrap_or(Value::Null);
        return match id {
            None => Some(Event::Notification { method, params }),
            Some(id) => match serde_json::from_value::<RequestId>(id) {
                Ok(id) => Some(Event::ServerRequest { id, method, params }),
                Err(_) => malformed(format!("request {method} with an invalid id")),
            },
        };
    }
    let Some(id) = id.as_ref().and_then(Value::as_i64) else {
        return malformed("neither a request, a notification nor an answer to us".into());
    };
    let reply = pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .waiting
        .remove(&id);
    let Some(reply) = reply else {
        // An answer after its request timed out, or to an id we never sent.
        return malformed(format!("an answer to id {id}, which no request awaits"));
    };
    let answer = match obj.remove("error") {
        Some(err) => Err(Error::Rpc {
            code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            data: err.get("data").cloned(),
        }),
        None => Ok(obj.remove("result").unwrap_or(Value::Null)),
    };
    let _ = reply.send(answer);
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_bounded_and_the_reader_goes_on() {
        let data = b"short\nthis line is far too long\n\nlast-no-newline".to_vec();
        let mut r = BufReader::with_capacity(4, &data[..]);
        let mut buf = vec![];
        assert!(matches!(
            read_line_bounded(&mut r, &mut buf, 10).await.unwrap(),
            Line::Complete
        ));
        assert_eq!(buf, b"short");
        assert!(matches!(
            read_line_bounded(&mut r, &mut buf, 10).await.unwrap(),
            Line::TooLong(25)
        ));
        assert!(buf.capacity() < 64 * 1024 + 16);
        assert!(matches!(
            read_line_bounded(&mut r, &mut buf, 10).await.unwrap(),
            Line::Complete
        ));
        assert!(buf.is_empty());
        assert!(matches!(
            read_line_bounded(&mut r, &mut buf, 100).await.unwrap(),
            Line::Complete
        ));
        assert_eq!(buf, b"last-no-newline");
        assert!(matches!(
            read_line_bounded(&mut r, &mut buf, 100).await.unwrap(),
            Line::Eof
        ));
    }

    #[test]
    fn dispatch_routes_answers_and_reports_garbage() {
        let pending = Mutex::new(Pending::default());
        let (tx, mut rx) = oneshot::channel();
        pending.lock().unwrap().waiting.insert(7, tx);
        assert!(
            dispatch(
                br#"{"id":7,"error":{"code":-32600,"message":"no"}}"#,
                &pending
            )
            .is_none()
        );
        match rx.try_recv().unwrap() {
            Err(Error::Rpc { code, message, .. }) => assert_eq!((code, &*message), (-32600, "no")),
            other => panic!("{other:?}"),
        }
        match dispatch(
            br#"{"id":"s1","method":"item/tool/call","params":{"a":1}}"#,
            &pending,
        ) {
            Some(Event::ServerRequest { id, method, .. }) => {
                assert_eq!(id, RequestId::Str("s1".into()));
                assert_eq!(method, "item/tool/call");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            dispatch(br#"{"method":"turn/started"}"#, &pending),
            Some(Event::Notification {
                params: Value::Null,
                ..
            })
        ));
        for bad in [
            &b"{nope"[..],
            b"[1,2]",
            b"{\"id\":99,\"result\":1}",
            b"{}",
            b"\xff\xfe",
        ] {
            assert!(
                matches!(dispatch(bad, &pending), Some(Event::Malformed { .. })),
                "{bad:?}"
            );
        }
    }
}
