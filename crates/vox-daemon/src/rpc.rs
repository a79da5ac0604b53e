//! The daemon socket protocol: newline-delimited JSON-RPC 2.0 over a Unix socket.
//!
//! Requests are answered concurrently and may complete out of order; frames without an `id`
//! travelling daemon → client are notifications. Lines are bounded by [`MAX_MESSAGE_BYTES`]:
//! a longer line gets an error answer and is discarded, and the connection keeps working.

use crate::frames::{
    CancelParams, ListToolsParams, LogParams, PingParams, ProgressParams, ToolCallAnswer,
    ToolCallParams,
};
use crate::lifetime::{Attached, Lifetime};
use crate::{MAX_MESSAGE_BYTES, PROTOCOL_VERSION};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, watch};
use vox_core::Orchestrator;
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

fn error_frame(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
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
) {
    let mut stop = stop_tx.subscribe();
    let stop_tx = Arc::new(stop_tx);
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(connection(stream, orch.clone(), stop_tx.clone(), in_flight.clone(), lifetime.clone()));
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
    tx: mpsc::UnboundedSender<Value>,
    calls: std::sync::Mutex<std::collections::HashMap<String, vox_core::Cancel>>,
    lifetime: Lifetime,
    /// Set once the connection attached as a client (`orch.ping {"attach": true}`).
    attached: std::sync::Mutex<Option<Attached>>,
}

impl Conn {
    fn cancel(&self, id: u64) {
        if let Some(c) = self.lock_calls().get(&id.to_string()) {
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
    id: Value,
    tx: mpsc::UnboundedSender<Value>,
}

impl vox_core::CallEvents for SocketEvents {
    fn progress(&self, progress: vox_core::Progress) {
        let params = ProgressParams {
            id: self.id.clone(),
            progress,
        };
        let _ = self
            .tx
            .send(json!({"jsonrpc": "2.0", "method": "orch.progress", "params": params}));
    }
    fn log(&self, message: vox_core::LogMessage) {
        let params = LogParams {
            id: self.id.clone(),
            message,
        };
        let _ = self
            .tx
            .send(json!({"jsonrpc": "2.0", "method": "orch.log", "params": params}));
    }
}

async fn connection(
    stream: UnixStream,
    orch: Arc<Orchestrator>,
    stop: Arc<watch::Sender<bool>>,
    in_flight: InFlight,
    lifetime: Lifetime,
) {
    // One connection is one session (a `vox mcp` process holds one): it scopes the active skill.
    static NEXT_CONNECTION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let session: Arc<str> =
        format!("socket:{}", NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed)).into();
    let (read, mut write) = stream.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
    let mut notes = orch.ctx().notifier.subscribe();
    let writer = tokio::spawn(async move {
        loop {
            let frame = tokio::select! {
                f = rx.recv() => match f {
                    Some(f) => f,
                    None => break,
                },
                n = notes.recv() => match n {
                    Ok(n) => n,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(_) => break,
                },
            };
            let mut bytes = serde_json::to_vec(&frame).unwrap_or_default();
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
    });
    let mut reader = BufReader::with_capacity(64 * 1024, read);
    // This connection's requests: the session ends only after the last of them, so a
    // `vox_skill_use` still running cannot re-activate a skill for a session already gone.
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        while tasks.try_join_next().is_some() {}
        let line = match read_line_bounded(&mut reader, MAX_MESSAGE_BYTES).await {
            Ok(Line::Data(l)) => l,
            Ok(Line::TooLong(n)) => {
                let _ = tx.send(error_frame(
                    Value::Null,
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
        let req: Value = match serde_json::from_slice(&line) {
            Ok(v) => v,
            Err(e) => {
                let _ = tx.send(error_frame(
                    Value::Null,
                    codes::PARSE_ERROR,
                    format!("malformed JSON: {e}"),
                ));
                continue;
            }
        };
        // Cancellation is a notification handled here in the reader, and every call's signal
        // is registered here before its task is spawned: a cancel (or the connection closing)
        // right behind a call always finds it.
        if req.get("method").and_then(Value::as_str) == Some("orch.cancel") {
            if let Some(p) = req
                .get("params")
                .and_then(|p| serde_json::from_value::<CancelParams>(p.clone()).ok())
            {
                conn.cancel(p.id);
            }
            continue;
        }
        let cancel = match (req.get("method").and_then(Value::as_str), req.get("id")) {
            (Some("orch.tool_call"), Some(id)) => {
                let cancel = vox_core::Cancel::new();
                let mut calls = conn.lock_calls();
                if calls.contains_key(&id.to_string()) {
                    let _ = tx.send(error_frame(
                        id.clone(),
                        codes::INVALID_REQUEST,
                        format!("request id {id} is already in use by a call in flight"),
                    ));
                    continue;
                }
                calls.insert(id.to_string(), cancel.clone());
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
            let id = req.get("id").map(Value::to_string);
            let frame = handle(&orch, req, &stop, &conn, cancel).await;
            if let Some(id) = id {
                conn.lock_calls().remove(&id);
            }
            if let Some(frame) = frame {
                let _ = conn.tx.send(frame);
            }
        });
    }
    // The client went away: its calls' work stops too.
    for c in conn.lock_calls().values() {
        c.cancel();
    }
    drop(tx);
    while tasks.join_next().await.is_some() {}
    drop(conn);
    let _ = writer.await;
    orch.end_session(&session);
}

/// Answers one request; `None` for notifications.
async fn handle(
    orch: &Arc<Orchestrator>,
    req: Value,
    stop: &watch::Sender<bool>,
    conn: &Conn,
    cancel: Option<vox_core::Cancel>,
) -> Option<Value> {
    let id = req.get("id").cloned();
    let Some(method) = req.get("method").and_then(Value::as_str) else {
        return Some(error_frame(
            id.unwrap_or(Value::Null),
            codes::INVALID_REQUEST,
            "missing `method`",
        ));
    };
    let id = id?;
    let params = req.get("params").cloned().unwrap_or(Value::Null);
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
            Ok(p) => Ok(json!({"tools": orch.tool_list_json(p.workspace_tools)})),
            Err(e) => Err(e),
        },
        "orch.list_resources" => Ok(json!({"resources": orch.resources()})),
        "orch.read_resource" => match params.get("uri").and_then(Value::as_str) {
            None => Err((
                codes::INVALID_PARAMS,
                "orch.read_resource needs a string `uri`".to_owned(),
            )),
            Some(uri) => {
                let uri = uri.to_owned();
                // Reading may compile or run Vox code: off the async worker.
                let o = orch.clone();
                let u = uri.clone();
                let text = tokio::task::spawn_blocking(move || o.read_resource(&u)).await;
                match text {
                    Ok(Ok(t)) => Ok(json!({"uri": uri, "text": t})),
                    Ok(Err(e)) => Ok(json!({"error": e.to_json()["error"]})),
                    Err(e) => Err((
                        codes::INVALID_REQUEST,
                        format!("reading {uri} panicked: {e}"),
                    )),
                }
            }
        },
        "orch.tool_call" => tool_call(orch, params, conn, &id, cancel.unwrap_or_default()).await,
        "orch.shutdown" => {
            let _ = stop.send(true);
            Ok(json!({"stopping": true}))
        }
        other => Err((codes::METHOD_NOT_FOUND, format!("unknown method {other}"))),
    };
    Some(match result {
        Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
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

/// Decodes a method's parameters (`null` is the default).
fn decode<T: serde::de::DeserializeOwned + Default>(
    method: &str,
    params: Value,
) -> Result<T, (i64, String)> {
    if params.is_null() {
        return Ok(T::default());
    }
    serde_json::from_value(params).map_err(|e| (codes::INVALID_PARAMS, format!("{method}: {e}")))
}

/// `orch.tool_call` ([`ToolCallParams`] → [`ToolCallAnswer`]) under `cancel`, the signal the
/// reader registered for this request id.
async fn tool_call(
    orch: &Orchestrator,
    params: Value,
    conn: &Conn,
    id: &Value,
    cancel: vox_core::Cancel,
) -> Result<Value, (i64, String)> {
    let p: ToolCallParams = serde_json::from_value(params)
        .map_err(|e| (codes::INVALID_PARAMS, format!("orch.tool_call: {e}")))?;
    let events = Arc::new(SocketEvents {
        id: id.clone(),
        tx: conn.tx.clone(),
    });
    let agent = p.agent.as_deref().unwrap_or("socket");
    let call = vox_core::CallCtx::new(Caller::LOCAL, agent, &conn.session)
        .with_cancel(cancel)
        .with_events(events, p.progress, p.log_level);
    let outcome = orch.call(&p.name, p.arguments, call).await;
    serde_json::to_value(ToolCallAnswer { outcome })
        .map_err(|e| (codes::INVALID_PARAMS, e.to_string()))
}
