//! The daemon socket protocol: newline-delimited JSON-RPC 2.0 over a Unix socket.
//!
//! Requests are answered concurrently and may complete out of order; frames without an `id`
//! travelling daemon → client are notifications. Lines are bounded by [`MAX_MESSAGE_BYTES`]:
//! a longer line gets an error answer and is discarded, and the connection keeps working.
//!
//! A request id travels as the raw JSON the client wrote ([`RawValue`]): answers, progress and
//! log frames echo it byte for byte (`123456789012345678901234567890123456789` is not rounded
//! to a float, `1.0` stays `1.0`), and `orch.cancel` names a call by the same text.

use crate::frames::{
    AnswerParams, AskParams, CancelParams, ListToolsParams, LogParams, PingParams, ProgressParams,
    ServeStdioParams, SessionState, ToolCallAnswer, ToolCallParams,
};
use crate::handoff::{FdReader, Pending, StdioHost, StdioSession};
use crate::lifetime::{Attached, Lifetime};
use crate::{MAX_MESSAGE_BYTES, PROTOCOL_VERSION};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, watch};
use vox_core::{Orchestrator, ToolOutcome};
use vox_mcp_registry::Caller;

/// JSON-RPC error codes used on the socket.
pub mod codes {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    /// The daemon is closing and takes no new client.
    pub const SHUTTING_DOWN: i64 = -32000;
}

/// One line read with a size bound.
pub enum Line {
    Data(Vec<u8>),
    TooLong(usize),
    Eof,
}

/// Reads one `\n`-terminated line of at most `max` bytes; longer lines are consumed and
/// reported as [`Line::TooLong`] so the stream stays in sync.
pub async fn read_line_bounded<R: AsyncBufRead + Unpin>(
    r: &mut R,
    max: usize,
) -> std::io::Result<Line> {
    let mut buf = Vec::new();
    let mut overflow = 0usize;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(if overflow > 0 {
                Line::TooLong(overflow)
            } else if buf.is_empty() {
                Line::Eof
            } else {
                Line::Data(buf)
            });
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if overflow == 0 && buf.len() + take <= max + 1 {
            buf.extend_from_slice(&chunk[..take]);
        } else {
            overflow = overflow.max(buf.len()) + take;
            buf.clear();
        }
        r.consume(take);
        if done {
            if overflow > 0 {
                return Ok(Line::TooLong(overflow));
            }
            buf.pop();
            return Ok(Line::Data(buf));
        }
    }
}

/// A request id, exactly as the client wrote it.
type Id = Box<RawValue>;

/// One request line. Typed parameters are decoded from their raw text, so numbers in them
/// keep their precision as well.
#[derive(Deserialize)]
struct Request {
    /// `None` when absent (a notification); `Some("null")` when the client sent `null`.
    #[serde(default, deserialize_with = "present")]
    id: Option<Id>,
    #[serde(default)]
    method: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    params: Option<Box<RawValue>>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

impl Request {
    fn method(&self) -> Option<&str> {
        self.method.as_ref().and_then(Value::as_str)
    }
    /// The parameters as JSON text (`null` when absent).
    fn params(&self) -> &str {
        self.params.as_deref().map_or("null", RawValue::get)
    }
}

/// An answer frame (`result` or `error`) carrying the request's raw id.
#[derive(Serialize)]
struct Answer<'a> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Value>,
}

/// A notification frame (daemon → client).
#[derive(Serialize)]
struct Note<'a, P> {
    jsonrpc: &'static str,
    method: &'a str,
    params: P,
}

/// A frame as the JSON text written to the socket.
type Frame = Box<RawValue>;

fn frame(x: &impl Serialize) -> Frame {
    serde_json::value::to_raw_value(x).unwrap_or_else(|e| {
        tracing::error!("cannot encode a socket frame: {e}");
        RawValue::NULL.to_owned()
    })
}

fn answer_frame(id: &RawValue, result: Value) -> Frame {
    frame(&Answer {
        jsonrpc: "2.0",
        id,
        result: Some(result),
        error: None,
    })
}

fn error_frame(id: &RawValue, code: i64, message: impl Into<String>) -> Frame {
    frame(&Answer {
        jsonrpc: "2.0",
        id,
        result: None,
        error: Some(json!({"code": code, "message": message.into()})),
    })
}

/// Counts requests in flight so shutdown can let them finish.
#[derive(Clone, Default)]
pub struct InFlight(Arc<AtomicUsize>);

/// One request in flight; dropping it ends it.
pub struct InFlightGuard(Arc<AtomicUsize>);

impl InFlight {
    /// Requests currently being answered.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
    /// Marks one request as started.
    pub fn enter(&self) -> InFlightGuard {
        self.0.fetch_add(1, Ordering::SeqCst);
        InFlightGuard(self.0.clone())
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Accepts connections until `stop` turns true; `stop_tx` lets `orch.shutdown` ask for it.
pub async fn serve(
    listener: UnixListener,
    orch: Arc<Orchestrator>,
    stop_tx: watch::Sender<bool>,
    in_flight: InFlight,
    lifetime: Lifetime,
    stdio: Option<StdioHost>,
) {
    let mut stop = stop_tx.subscribe();
    let stop_tx = Arc::new(stop_tx);
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(connection(stream, orch.clone(), stop_tx.clone(), in_flight.clone(), lifetime.clone(), stdio.clone()));
                }
                Err(e) => tracing::warn!("accept failed: {e}"),
            },
        }
    }
}

/// What one connection's requests share: its session key, where its frames go, and the
/// cancellation signal of each call in flight (by request id).
struct Conn {
    session: Arc<str>,
    tx: mpsc::UnboundedSender<Frame>,
    /// Keyed by the raw text of the request id.
    calls: std::sync::Mutex<std::collections::HashMap<String, vox_core::Cancel>>,
    lifetime: Lifetime,
    /// Set once the connection attached as a client (`orch.ping {"attach": true}`).
    attached: std::sync::Mutex<Option<Attached>>,
    /// The `orch.ask` requests waiting for the client's `orch.answer`, by ask number.
    asks: Arc<Asks>,
}

/// Most `orch.ask` requests of one connection waiting at once.
const MAX_WAITING_ASKS: usize = 64;

/// A connection's client requests in flight.
#[derive(Default)]
struct Asks {
    next: AtomicU64,
    waiting: std::sync::Mutex<
        std::collections::HashMap<u64, tokio::sync::oneshot::Sender<Result<Value, String>>>,
    >,
}

impl Asks {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        std::collections::HashMap<u64, tokio::sync::oneshot::Sender<Result<Value, String>>>,
    > {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Gives the client's `orch.answer` to the request waiting for it (none: it stopped waiting).
    fn answer(&self, a: AnswerParams) {
        if let Some(tx) = self.lock().remove(&a.ask) {
            let _ = tx.send(match (a.result, a.error) {
                (Some(v), None) => Ok(v),
                (_, Some(why)) => Err(why),
                (None, None) => {
                    Err("the client answered with neither a result nor an error".into())
                }
            });
        }
    }
}

impl Conn {
    fn cancel(&self, id: &RawValue) {
        if let Some(c) = self.lock_calls().get(id.get()) {
            c.cancel();
        }
    }
    fn lock_calls(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, vox_core::Cancel>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A call's progress and log messages, as `orch.progress` / `orch.log` frames tied to the
/// request id.
struct SocketEvents {
    id: Id,
    tx: mpsc::UnboundedSender<Frame>,
    asks: Arc<Asks>,
}

impl vox_core::CallEvents for SocketEvents {
    /// An `orch.ask` frame to the client, which asks its own MCP client.
    fn ask(&self, kind: vox_core::Ask, params: Value) -> Result<vox_core::AskReply, String> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let ask = self.asks.next.fetch_add(1, Ordering::Relaxed);
        {
            let mut waiting = self.asks.lock();
            // Requests whose caller stopped waiting leave their closed senders behind.
            waiting.retain(|_, s| !s.is_closed());
            if waiting.len() >= MAX_WAITING_ASKS {
                return Err(format!(
                    "{MAX_WAITING_ASKS} client requests of this connection are already waiting"
                ));
            }
            waiting.insert(ask, tx);
        }
        let sent = self.tx.send(frame(&Note {
            jsonrpc: "2.0",
            method: "orch.ask",
            params: AskParams {
                id: self.id.clone(),
                ask,
                kind,
                params,
            },
        }));
        if sent.is_err() {
            self.asks.lock().remove(&ask);
            return Err("the client's connection has closed".into());
        }
        Ok(rx)
    }

    fn progress(&self, progress: vox_core::Progress) {
        let params = ProgressParams {
            id: self.id.clone(),
            progress,
        };
        let _ = self.tx.send(frame(&Note {
            jsonrpc: "2.0",
            method: "orch.progress",
            params,
        }));
    }
    fn log(&self, message: vox_core::LogMessage) {
        let params = LogParams {
            id: self.id.clone(),
            message,
        };
        let _ = self.tx.send(frame(&Note {
            jsonrpc: "2.0",
            method: "orch.log",
            params,
        }));
    }
}

async fn connection(
    stream: UnixStream,
    orch: Arc<Orchestrator>,
    stop: Arc<watch::Sender<bool>>,
    in_flight: InFlight,
    lifetime: Lifetime,
    stdio: Option<StdioHost>,
) {
    // One connection is one session (a `vox mcp` process holds one): it scopes the active skill.
    static NEXT_CONNECTION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let session: Arc<str> =
        format!("socket:{}", NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed)).into();
    let (read, mut write) = stream.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Frame>();
    let mut notes = orch.ctx().notifier.subscribe();
    let writer = tokio::spawn(async move {
        loop {
            let f = tokio::select! {
                f = rx.recv() => match f {
                    Some(f) => f,
                    None => break,
                },
                n = notes.recv() => match n {
                    Ok(n) => frame(&n),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(_) => break,
                },
            };
            let mut bytes = Vec::with_capacity(f.get().len() + 1);
            bytes.extend_from_slice(f.get().as_bytes());
            bytes.push(b'\n');
            if write.write_all(&bytes).await.is_err() {
                break;
            }
        }
    });
    let conn = Arc::new(Conn {
        session: session.clone(),
        tx: tx.clone(),
        calls: Default::default(),
        lifetime,
        attached: Default::default(),
        asks: Default::default(),
    });
    let mut reader = BufReader::with_capacity(64 * 1024, FdReader::new(read));
    // Fires when this connection closes: a session handed off on it ends with it.
    let closed = vox_core::Cancel::new();
    // This connection's requests: the session ends only after the last of them, so a
    // `vox_skill_use` still running cannot re-activate a skill for a session already gone.
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        while tasks.try_join_next().is_some() {}
        let line = match read_line_bounded(&mut reader, MAX_MESSAGE_BYTES).await {
            Ok(Line::Data(l)) => l,
            Ok(Line::TooLong(n)) => {
                let _ = tx.send(error_frame(
                    RawValue::NULL,
                    codes::INVALID_REQUEST,
                    format!("message of {n} bytes exceeds the {MAX_MESSAGE_BYTES} byte limit"),
                ));
                continue;
            }
            Ok(Line::Eof) | Err(_) => break,
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let req: Request = match serde_json::from_slice(&line) {
            Ok(r) => r,
            Err(e) => {
                // Well-formed JSON that is no request object is an invalid request.
                let (code, message) = match serde_json::from_slice::<serde::de::IgnoredAny>(&line) {
                    Ok(_) => (
                        codes::INVALID_REQUEST,
                        format!("a request is a JSON object: {e}"),
                    ),
                    Err(_) => (codes::PARSE_ERROR, format!("malformed JSON: {e}")),
                };
                let _ = tx.send(error_frame(RawValue::NULL, code, message));
                continue;
            }
        };
        // Cancellation is a notification handled here in the reader, and every call's signal
        // is registered here before its task is spawned: a cancel (or the connection closing)
        // right behind a call always finds it.
        if req.method() == Some("orch.cancel") {
            if let Ok(p) = serde_json::from_str::<CancelParams>(req.params()) {
                conn.cancel(&p.id);
            }
            continue;
        }
        if req.method() == Some("orch.serve_stdio") {
            let fds = reader.get_mut().take_fds();
            match hand_off(&req, fds, stdio.as_ref(), &orch, &conn, &closed) {
                Ok(serve) => {
                    // Not attached as a client: `vox mcp`'s first connection is, for its life.
                    let tx = tx.clone();
                    tasks.spawn(async move {
                        serve.await;
                        let _ = tx.send(frame(&Note {
                            jsonrpc: "2.0",
                            method: "orch.stdio_done",
                            params: json!({}),
                        }));
                    });
                }
                Err(message) => {
                    let _ = tx.send(error_frame(
                        req.id.as_deref().unwrap_or(RawValue::NULL),
                        codes::INVALID_PARAMS,
                        message,
                    ));
                }
            }
            continue;
        }
        if req.method() == Some("orch.answer") {
            match serde_json::from_str::<AnswerParams>(req.params()) {
                Ok(a) => conn.asks.answer(a),
                Err(e) => tracing::debug!("a malformed orch.answer: {e}"),
            }
            continue;
        }
        let cancel = match (req.method(), req.id.as_deref()) {
            (Some("orch.tool_call" | "research.run" | "research.persist_claims"), Some(id)) => {
                let cancel = vox_core::Cancel::new();
                let mut calls = conn.lock_calls();
                if calls.contains_key(id.get()) {
                    let _ = tx.send(error_frame(
                        id,
                        codes::INVALID_REQUEST,
                        format!("request id {id} is already in use by a call in flight"),
                    ));
                    continue;
                }
                calls.insert(id.get().to_owned(), cancel.clone());
                Some(cancel)
            }
            _ => None,
        };
        let orch = orch.clone();
        let stop = stop.clone();
        let guard = in_flight.enter();
        let conn = conn.clone();
        tasks.spawn(async move {
            let _guard = guard;
            let id = req.id.as_deref().map(|id| id.get().to_owned());
            let frame = handle(&orch, req, &stop, &conn, cancel).await;
            if let Some(id) = id {
                conn.lock_calls().remove(&id);
            }
            if let Some(frame) = frame {
                let _ = conn.tx.send(frame);
            }
        });
    }
    // The client went away: its calls' work stops too, and a session it handed off.
    closed.cancel();
    for c in conn.lock_calls().values() {
        c.cancel();
    }
    drop(tx);
    while tasks.join_next().await.is_some() {}
    drop(conn);
    let _ = writer.await;
    orch.end_session(&session);
}

/// Starts serving the stdio session `orch.serve_stdio` hands off with its three descriptors
/// (input, output, pending table); the future serves it to its end.
fn hand_off(
    req: &Request,
    fds: Vec<std::os::fd::OwnedFd>,
    host: Option<&StdioHost>,
    orch: &Arc<Orchestrator>,
    conn: &Conn,
    closed: &vox_core::Cancel,
) -> Result<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>, String> {
    let host = host.ok_or("this daemon serves no handed-off stdio session")?;
    let params: ServeStdioParams = decode("orch.serve_stdio", req.params()).map_err(|e| e.1)?;
    let [input, output, table]: [std::os::fd::OwnedFd; 3] =
        fds.try_into().map_err(|f: Vec<_>| {
            format!(
                "orch.serve_stdio carries 3 descriptors (input, output, pending table), not {}",
                f.len()
            )
        })?;
    let pending = Pending::map(table).map_err(|e| format!("orch.serve_stdio: {e}"))?;
    let tx = conn.tx.clone();
    let report = Box::new(move |state: &SessionState| {
        let _ = tx.send(frame(&Note {
            jsonrpc: "2.0",
            method: "orch.session",
            params: state,
        }));
    });
    Ok(host(StdioSession {
        orch: orch.clone(),
        input,
        output,
        pending,
        params,
        session: conn.session.clone(),
        report,
        closed: closed.clone(),
    }))
}

/// Runs `work`, which may compile or run Vox code, on the blocking pool: its answer, a tool
/// error as the one error shape, or an invalid-request error saying `what` panicked.
async fn off_worker(
    what: &str,
    work: impl FnOnce() -> Result<Value, vox_core::ToolError> + Send + 'static,
) -> Result<Value, (i64, String)> {
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Ok(json!({"error": e.to_json()["error"]})),
        Err(e) => Err((codes::INVALID_REQUEST, format!("{what} panicked: {e}"))),
    }
}

/// `orch.complete`'s parameters.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CompleteParams {
    /// A prompt's argument, else a resource template's variable.
    prompt: bool,
    name: String,
    argument: String,
    value: String,
}

/// `orch.get_prompt`'s parameters.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct GetPromptParams {
    name: String,
    #[serde(default)]
    arguments: Value,
}

/// Answers one request; `None` for notifications.
async fn handle(
    orch: &Arc<Orchestrator>,
    req: Request,
    stop: &watch::Sender<bool>,
    conn: &Conn,
    cancel: Option<vox_core::Cancel>,
) -> Option<Frame> {
    let Some(method) = req.method() else {
        return Some(error_frame(
            req.id.as_deref().unwrap_or(RawValue::NULL),
            codes::INVALID_REQUEST,
            "missing `method`",
        ));
    };
    let id = req.id.as_deref()?;
    let params = req.params();
    let result = match method {
        "orch.ping" => match decode::<PingParams>(method, params) {
            Ok(p) => ping_as(orch, conn, p),
            Err(e) => Err(e),
        },
        "orch.retire" => {
            // A client that needs another profile asks a spawned daemon nobody uses to go.
            let retired = conn.lifetime.retire_if_unattended();
            if retired {
                tracing::info!("retired by a client that needs another profile");
                let _ = stop.send(true);
            }
            Ok(json!({"retired": retired}))
        }
        "orch.boot_report" => Ok(serde_json::to_value(orch.boot_report()).unwrap_or_default()),
        "orch.list_tools" => match decode::<ListToolsParams>(method, params) {
            Ok(ListToolsParams {
                agent_token: Some(token),
                ..
            }) => match orch.authenticate_agent(&token) {
                Ok(a) => Ok(json!({"tools": orch.agent_tool_list_json(&a)})),
                Err(e) => Err((codes::INVALID_PARAMS, e.to_string())),
            },
            Ok(p) => Ok(json!({"tools": orch.tool_list_json(p.workspace_tools)})),
            Err(e) => Err(e),
        },
        "orch.list_resources" => Ok(json!({"resources": orch.resources()})),
        "orch.list_prompts" => Ok(json!({"prompts": orch.prompts()})),
        "orch.list_resource_templates" => {
            Ok(json!({"resourceTemplates": orch.resource_templates()}))
        }
        "orch.complete" => match serde_json::from_str::<CompleteParams>(params) {
            Err(e) => Err((codes::INVALID_PARAMS, format!("orch.complete: {e}"))),
            Ok(p) => {
                let o = orch.clone();
                off_worker("a completion", move || {
                    o.complete(p.prompt, &p.name, &p.argument, &p.value)
                })
                .await
            }
        },
        "orch.get_prompt" => match serde_json::from_str::<GetPromptParams>(params) {
            Err(e) => Err((codes::INVALID_PARAMS, format!("orch.get_prompt: {e}"))),
            Ok(p) => {
                let o = orch.clone();
                off_worker("a prompt", move || o.get_prompt(&p.name, &p.arguments)).await
            }
        },
        "orch.read_resource" => match serde_json::from_str::<Value>(params)
            .ok()
            .and_then(|p| p.get("uri").and_then(Value::as_str).map(str::to_owned))
        {
            None => Err((
                codes::INVALID_PARAMS,
                "orch.read_resource needs a string `uri`".to_owned(),
            )),
            Some(uri) => {
                let o = orch.clone();
                let what = format!("reading {uri}");
                off_worker(&what, move || {
                    let body = o.read_resource(&uri)?;
                    Ok(json!({"uri": uri, "contents": body}))
                })
                .await
            }
        },
        "orch.tool_call" => tool_call(orch, params, conn, id, cancel.unwrap_or_default()).await,
        // The daemon-only research RPCs are the research tools under other names, so the
        // decision (the daemon's profile, the research subsystem booted) is the tools' own.
        "research.run" | "research.persist_claims" => {
            let tool = if method == "research.run" {
                "vox_research_run"
            } else {
                "vox_research_persist_claims"
            };
            match serde_json::from_str::<Value>(params) {
                Ok(arguments @ Value::Object(_)) => {
                    let call = vox_core::CallCtx::new(Caller::LOCAL, "socket", &conn.session)
                        .with_cancel(cancel.unwrap_or_default());
                    let outcome = orch.call(tool, arguments, call).await;
                    serde_json::to_value(ToolCallAnswer { outcome })
                        .map_err(|e| (codes::INVALID_PARAMS, e.to_string()))
                }
                _ => Err((
                    codes::INVALID_PARAMS,
                    format!("{method} takes the arguments of {tool} as an object"),
                )),
            }
        }
        "orch.shutdown" => {
            let _ = stop.send(true);
            Ok(json!({"stopping": true}))
        }
        other => Err((codes::METHOD_NOT_FOUND, format!("unknown method {other}"))),
    };
    Some(match result {
        Ok(r) => answer_frame(id, r),
        Err((code, message)) => error_frame(id, code, message),
    })
}

/// `orch.ping`: attaches the connection as a client or keeps the daemon when asked, then
/// answers who the daemon is and how long it lives. A daemon that is closing turns an
/// attaching client away, which then spawns a new one.
fn ping_as(orch: &Orchestrator, conn: &Conn, p: PingParams) -> Result<Value, (i64, String)> {
    if p.keep {
        conn.lifetime.keep();
    }
    if p.attach {
        let mut attached = conn.attached.lock().unwrap_or_else(|e| e.into_inner());
        if attached.is_none() {
            *attached = Some(conn.lifetime.attach().ok_or((
                codes::SHUTTING_DOWN,
                "the daemon is shutting down".to_owned(),
            ))?);
        }
    }
    Ok(ping(orch, &conn.lifetime))
}

/// `orch.ping`'s answer.
pub fn ping(orch: &Orchestrator, lifetime: &Lifetime) -> Value {
    json!({
        "profile": orch.profile().canonical(),
        "protocol_version": PROTOCOL_VERSION,
        "workspace_id": orch.workspace().id,
        "workspace": orch.workspace().root,
        "pid": std::process::id(),
        "version": env!("CARGO_PKG_VERSION"),
        "log": log_file(&orch.workspace().daemon_log_path()),
        "lifetime": lifetime.report(),
    })
}

/// `path` when this process's stderr is that file (a daemon `vox mcp` or `vox daemon start`
/// spawned); `None` when it logs elsewhere (`vox serve` or a daemon run by hand: its terminal).
fn log_file(path: &std::path::Path) -> Option<std::path::PathBuf> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let stderr = std::fs::File::from(std::io::stderr().as_fd().try_clone_to_owned().ok()?);
    let (a, b) = (stderr.metadata().ok()?, std::fs::metadata(path).ok()?);
    (a.dev() == b.dev() && a.ino() == b.ino()).then(|| path.to_owned())
}

/// Decodes a method's parameters from their JSON text (`null` is the default).
fn decode<T: serde::de::DeserializeOwned + Default>(
    method: &str,
    params: &str,
) -> Result<T, (i64, String)> {
    if params == "null" {
        return Ok(T::default());
    }
    serde_json::from_str(params).map_err(|e| (codes::INVALID_PARAMS, format!("{method}: {e}")))
}

/// `orch.tool_call` ([`ToolCallParams`] → [`ToolCallAnswer`]) under `cancel`, the signal the
/// reader registered for this request id.
async fn tool_call(
    orch: &Orchestrator,
    params: &str,
    conn: &Conn,
    id: &RawValue,
    cancel: vox_core::Cancel,
) -> Result<Value, (i64, String)> {
    let p: ToolCallParams = serde_json::from_str(params)
        .map_err(|e| (codes::INVALID_PARAMS, format!("orch.tool_call: {e}")))?;
    let events = Arc::new(SocketEvents {
        id: id.to_owned(),
        tx: conn.tx.clone(),
        asks: conn.asks.clone(),
    });
    let agent = p.agent.as_deref().unwrap_or("socket");
    let call = vox_core::CallCtx::new(Caller::LOCAL, agent, &conn.session)
        .with_cancel(cancel)
        .with_events(events, p.progress, p.log_level);
    let outcome = match &p.agent_token {
        None => orch.call(&p.name, p.arguments, call).await,
        Some(token) => match orch.authenticate_agent(token) {
            Ok(a) => orch.call_as_agent(&a.id, &p.name, p.arguments, call).await,
            Err(e) => ToolOutcome::Failed(e),
        },
    };
    serde_json::to_value(ToolCallAnswer { outcome })
        .map_err(|e| (codes::INVALID_PARAMS, e.to_string()))
}
