//! The daemon socket: each connection is either an MCP session or a control connection,
//! as its first line says.
//!
//! - `orch.mcp` ([`McpParams`]: whose session, workspace tools, what to restore), answered,
//!   then MCP from the next byte; or an MCP message itself (the operator's session). Either is
//!   served by the one MCP server ([`SessionHost::serve_socket`]) under a [`CallScope`]
//!   resolved here, at the edge.
//! - Anything else is the small control protocol, newline-delimited JSON-RPC 2.0: `orch.ping`
//!   (who the daemon is: profile, workspace, protocol version; attaching a client),
//!   `orch.boot_report`, `orch.retire`, `orch.shutdown`, `orch.serve_stdio` (a stdio session
//!   handed off with its descriptors), `research.run` / `research.persist_claims` (the
//!   research tools under the daemon-only names the spec gives them) and `orch.cancel`.
//!
//! Control requests are answered concurrently and may complete out of order. Lines are bounded
//! by [`MAX_MESSAGE_BYTES`]: a longer line gets an error answer and is discarded, and the
//! connection keeps working. A request id travels as the raw JSON the client wrote
//! ([`RawValue`]): answers echo it byte for byte (`123456789012345678901234567890123456789` is
//! not rounded to a float, `1.0` stays `1.0`), and `orch.cancel` names a call by the same text.

use crate::frames::{CancelParams, McpParams, PingParams, ServeStdioParams, SessionState};
use crate::handoff::{FdReader, Pending, StdioSession};
use crate::host::{SessionHost, SocketSession};
use crate::lifetime::{Attached, Lifetime};
use crate::{MAX_MESSAGE_BYTES, PROTOCOL_VERSION};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::AsyncReadExt;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, watch};
use vox_core::{CallRun, CallScope, Orchestrator, WorkspaceTools};
use vox_mcp_registry::Caller;

/// JSON-RPC error codes used on the socket.
pub mod codes {
    /// JSON-RPC: the line is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// JSON-RPC: the JSON is not a request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// JSON-RPC: no such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// JSON-RPC: the method's params are wrong.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The daemon is closing and takes no new client.
    pub const SHUTTING_DOWN: i64 = -32000;
}

/// One line read with a size bound.
pub enum Line {
    /// A whole line, without its `\n`.
    Data(Vec<u8>),
    /// A line longer than the bound, consumed and dropped; how many bytes it had.
    TooLong(usize),
    /// The stream ended (no byte before it).
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
            // The buffer holds up to `max + 1` bytes, room for a `\n` that a last line
            // without one does not have: one byte more than `max` is too long here.
            return Ok(if overflow > 0 {
                Line::TooLong(overflow)
            } else if buf.len() > max {
                Line::TooLong(buf.len())
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
                // The line's length, as `Data` would hold it: without its `\n`.
                return Ok(Line::TooLong(overflow - 1));
            }
            buf.pop();
            return Ok(Line::Data(buf));
        }
    }
}

/// Reads a connection's first line: the first that is not blank (ASCII whitespace only),
/// bounded as [`read_line_bounded`] bounds every line.
pub async fn read_first_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    max: usize,
) -> std::io::Result<Line> {
    loop {
        match read_line_bounded(r, max).await? {
            Line::Data(l) if l.iter().all(u8::is_ascii_whitespace) => continue,
            line => return Ok(line),
        }
    }
}

/// What a connection is, as its first line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstLine {
    /// An `orch.mcp` request: its answer, then MCP from the next byte.
    McpPreamble,
    /// A request naming a method that is not a control method: an MCP message, the first of
    /// the operator's MCP session.
    Mcp,
    /// Anything else (a control method, no method, no request at all, a line too long): the
    /// control protocol, which answers this line first.
    Control,
}

/// Classifies a connection's first (non-blank) line; `None` is a line too long (or none at
/// all), which the control protocol answers. Total: every line is one of the three.
pub fn classify_first_line(line: Option<&[u8]>) -> FirstLine {
    line.map_or(FirstLine::Control, |l| classify(l).0)
}

/// [`classify_first_line`] with the request the line parsed as, if any.
fn classify(line: &[u8]) -> (FirstLine, Option<Request>) {
    let Ok(req) = request(line) else {
        return (FirstLine::Control, None);
    };
    let kind = match req.method() {
        Some("orch.mcp") => FirstLine::McpPreamble,
        Some(m) if !CONTROL.contains(&m) => FirstLine::Mcp,
        _ => FirstLine::Control,
    };
    (kind, Some(req))
}

/// The JSON-RPC error code the control protocol answers a non-blank line with
/// ([`codes::PARSE_ERROR`] for malformed JSON, [`codes::INVALID_REQUEST`] for JSON that is no
/// request object), or `None` when the line is a request.
pub fn request_error(line: &[u8]) -> Option<i64> {
    parse_request(line).err().map(|(code, _)| code)
}

/// Parses a request: a JSON object. Not an array, which serde would otherwise read into
/// [`Request`] by position (`[1, "orch.ping"]` as a ping): JSON-RPC has no such form (an
/// array is a batch, which this protocol does not take).
/// Nor a line that is not UTF-8, as JSON text is (skipping an unknown member's string does not
/// check it).
fn request(line: &[u8]) -> serde_json::Result<Request> {
    let line = std::str::from_utf8(line).map_err(serde::de::Error::custom)?;
    if line.trim_ascii_start().starts_with('[') {
        return Err(serde::de::Error::invalid_type(
            serde::de::Unexpected::Seq,
            &"a request object",
        ));
    }
    serde_json::from_str(line)
}

/// Parses a control line as a request, or the error code and message it is answered with.
fn parse_request(line: &[u8]) -> Result<Request, (i64, String)> {
    request(line).map_err(|e| {
        // Well-formed JSON that is no request object is an invalid request. JSON text is
        // UTF-8, which skipping over a value does not check.
        let json = std::str::from_utf8(line)
            .is_ok_and(|l| serde_json::from_str::<serde::de::IgnoredAny>(l).is_ok());
        match json {
            true => (
                codes::INVALID_REQUEST,
                format!("a request is a JSON object: {e}"),
            ),
            false => (codes::PARSE_ERROR, format!("malformed JSON: {e}")),
        }
    })
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
    host: Option<Arc<dyn SessionHost>>,
) {
    let mut stop = stop_tx.subscribe();
    let stop_tx = Arc::new(stop_tx);
    let mut backoff = vox_core::AcceptBackoff::default();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    backoff.reset();
                    let daemon = Daemon { orch: orch.clone(), stop: stop_tx.clone(), in_flight: in_flight.clone(), lifetime: lifetime.clone(), host: host.clone() };
                    tokio::spawn(connection(stream, daemon));
                }
                // At the descriptor limit the listener stays readable: back off, log once.
                Err(e) => backoff.wait(&e).await,
            },
        }
    }
}

/// What one control connection's requests share: its session key, where its frames go, and
/// the cancellation signal of each call in flight (by request id).
struct Conn {
    session: Arc<str>,
    tx: mpsc::UnboundedSender<Frame>,
    /// Keyed by the raw text of the request id.
    calls: std::sync::Mutex<std::collections::HashMap<String, vox_core::Cancel>>,
    lifetime: Lifetime,
    /// Set once the connection attached as a client (`orch.ping {"attach": true}`).
    attached: std::sync::Mutex<Option<Attached>>,
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

/// What every connection shares.
#[derive(Clone)]
struct Daemon {
    orch: Arc<Orchestrator>,
    stop: Arc<watch::Sender<bool>>,
    in_flight: InFlight,
    lifetime: Lifetime,
    host: Option<Arc<dyn SessionHost>>,
}

/// The control methods; a first line naming another method is an MCP message.
const CONTROL: [&str; 8] = [
    "orch.ping",
    "orch.boot_report",
    "orch.retire",
    "orch.shutdown",
    "orch.serve_stdio",
    "orch.cancel",
    "research.run",
    "research.persist_claims",
];

/// Serves one connection as its first line says: an MCP session (`orch.mcp`, or an MCP
/// message), or control requests.
async fn connection(stream: UnixStream, d: Daemon) {
    // One connection is one session (a `vox mcp` process holds one): it scopes the active skill.
    static NEXT_CONNECTION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let session: Arc<str> =
        format!("socket:{}", NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed)).into();
    let (read, write) = stream.into_split();
    let mut reader = BufReader::with_capacity(64 * 1024, FdReader::new(read));
    let Ok(first) = read_first_line(&mut reader, MAX_MESSAGE_BYTES).await else {
        return;
    };
    let (kind, parsed) = match &first {
        Line::Data(l) => classify(l),
        _ => (FirstLine::Control, None),
    };
    match (kind, parsed, first) {
        (FirstLine::McpPreamble, Some(req), _) => {
            mcp_preamble(req, reader, write, d.clone(), &session).await;
        }
        (FirstLine::Mcp, _, Line::Data(line)) => {
            // An MCP client that sent no preamble: the operator's session, its first message
            // read again by the MCP server.
            let mut replay = line;
            replay.push(b'\n');
            let input = std::io::Cursor::new(replay).chain(reader);
            let scope = socket_scope(&d.orch, &session, &McpParams::default());
            if let Ok(scope) = scope {
                mcp_session(Box::new(input), write, scope, &d).await;
            }
        }
        (_, _, first) => control(first, reader, write, d.clone(), session.clone()).await,
    }
    d.orch.end_session(&session);
}

/// The scope of an MCP session on this socket: the operator (a local client, whose socket only
/// its own user can open), or the agent whose credential it shows.
fn socket_scope(
    orch: &Orchestrator,
    session: &str,
    p: &McpParams,
) -> Result<Arc<CallScope>, vox_core::ToolError> {
    let scope = CallScope::new(orch.profile().clone(), Caller::LOCAL, "socket", session);
    let scope = match p.agent_token.as_deref() {
        Some(token) => scope.as_agent(&orch.authenticate_agent(token)?.id),
        None if p.workspace_tools => scope.with_workspace_tools(WorkspaceTools::Listed),
        None => scope.with_workspace_tools(WorkspaceTools::Callable),
    };
    Ok(Arc::new(scope))
}

/// `orch.mcp`: resolves the session's scope, restores what it had chosen on a daemon that died,
/// answers, then serves MCP on the rest of the connection. A refused credential is answered
/// with the error and the connection closed.
async fn mcp_preamble(
    req: Request,
    reader: BufReader<FdReader>,
    mut write: tokio::net::unix::OwnedWriteHalf,
    d: Daemon,
    session: &str,
) {
    let id = req.id.clone().unwrap_or_else(|| RawValue::NULL.to_owned());
    let scope = decode::<McpParams>("orch.mcp", req.params()).and_then(|p| {
        let scope = socket_scope(&d.orch, session, &p)
            .map_err(|e| (codes::INVALID_PARAMS, e.to_string()))?;
        let restored = match &p.session {
            None => Ok(()),
            Some(s) => serde_json::from_value::<vox_core::SessionEffect>(s.clone())
                .map_err(|e| vox_core::ToolError::invalid_arguments(format!("`session`: {e}")))
                .and_then(|effect| d.orch.restore_session(&scope, &effect)),
        };
        restored.map_err(|e| (codes::INVALID_PARAMS, format!("orch.mcp: {e}")))?;
        Ok(scope)
    });
    let (answer, scope) = match scope {
        Ok(scope) => (answer_frame(&id, ping(&d.orch, &d.lifetime)), Some(scope)),
        Err((code, message)) => (error_frame(&id, code, message), None),
    };
    let mut bytes = answer.get().as_bytes().to_vec();
    bytes.push(b'\n');
    if write.write_all(&bytes).await.is_err() {
        return;
    }
    if let Some(scope) = scope {
        mcp_session(Box::new(reader), write, scope, &d).await;
    }
}

/// Serves an MCP session on the socket, attached as a client for its life.
async fn mcp_session(
    input: Box<dyn tokio::io::AsyncRead + Send + Unpin>,
    output: tokio::net::unix::OwnedWriteHalf,
    scope: Arc<CallScope>,
    d: &Daemon,
) {
    let (Some(host), Some(_attached)) = (&d.host, d.lifetime.attach()) else {
        // No MCP server in this daemon, or it is closing: the client sees the connection close.
        return;
    };
    // A client that does not read its answers is not read from, and is cut off in the end.
    let (input, output) = crate::paced::pace(input, output);
    host.serve_socket(SocketSession {
        orch: d.orch.clone(),
        input: Box::new(input),
        output: Box::pin(output),
        scope,
        in_flight: d.in_flight.clone(),
    })
    .await;
}

/// Serves control requests, the first of which is `first`.
async fn control(
    first: Line,
    mut reader: BufReader<FdReader>,
    mut write: tokio::net::unix::OwnedWriteHalf,
    d: Daemon,
    session: Arc<str>,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Frame>();
    let writer = tokio::spawn(async move {
        while let Some(f) = rx.recv().await {
            let mut bytes = Vec::with_capacity(f.get().len() + 1);
            bytes.extend_from_slice(f.get().as_bytes());
            bytes.push(b'\n');
            if write.write_all(&bytes).await.is_err() {
                break;
            }
        }
    });
    let conn = Arc::new(Conn {
        session,
        tx: tx.clone(),
        calls: Default::default(),
        lifetime: d.lifetime.clone(),
        attached: Default::default(),
    });
    // Fires when this connection closes: a session handed off on it ends with it.
    let closed = vox_core::Cancel::new();
    // This connection's requests: the session ends only after the last of them.
    let mut tasks = tokio::task::JoinSet::new();
    let mut next = Some(first);
    loop {
        while tasks.try_join_next().is_some() {}
        let line = match next.take() {
            Some(l) => l,
            None => match read_line_bounded(&mut reader, MAX_MESSAGE_BYTES).await {
                Ok(l) => l,
                Err(_) => break,
            },
        };
        let line = match line {
            Line::Data(l) => l,
            Line::TooLong(n) => {
                let _ = tx.send(error_frame(
                    RawValue::NULL,
                    codes::INVALID_REQUEST,
                    format!("message of {n} bytes exceeds the {MAX_MESSAGE_BYTES} byte limit"),
                ));
                continue;
            }
            Line::Eof => break,
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let req = match parse_request(&line) {
            Ok(r) => r,
            Err((code, message)) => {
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
            match hand_off(&req, fds, d.host.as_ref(), &d.orch, &conn, &closed) {
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
        let cancel = match (req.method(), req.id.as_deref()) {
            (Some("research.run" | "research.persist_claims"), Some(id)) => {
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
        let d = d.clone();
        let guard = d.in_flight.enter();
        let conn = conn.clone();
        tasks.spawn(async move {
            let _guard = guard;
            let id = req.id.as_deref().map(|id| id.get().to_owned());
            let frame = handle(&d.orch, req, &d.stop, &conn, cancel).await;
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
}

/// Starts serving the stdio session `orch.serve_stdio` hands off with its three descriptors
/// (input, output, pending table); the future serves it to its end.
fn hand_off(
    req: &Request,
    fds: Vec<std::os::fd::OwnedFd>,
    host: Option<&Arc<dyn SessionHost>>,
    orch: &Arc<Orchestrator>,
    conn: &Conn,
    closed: &vox_core::Cancel,
) -> Result<crate::host::Serving, String> {
    let host = host.ok_or("this daemon serves no handed-off stdio session")?;
    let params: ServeStdioParams = decode("orch.serve_stdio", req.params()).map_err(|e| e.1)?;
    let mcp = McpParams {
        workspace_tools: params.workspace_tools,
        agent_token: params.agent_token,
        session: None,
    };
    let scope = socket_scope(orch, &conn.session, &mcp).map_err(|e| e.to_string())?;
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
    Ok(host.serve_stdio(StdioSession {
        orch: orch.clone(),
        input,
        output,
        pending,
        scope,
        report,
        closed: closed.clone(),
    }))
}

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
                    let run = CallRun::cancelled_by(cancel.unwrap_or_default());
                    let scope = CallScope::new(
                        orch.profile().clone(),
                        Caller::LOCAL,
                        "socket",
                        &conn.session,
                    );
                    let outcome = orch.call(&Arc::new(scope), tool, arguments, run).await;
                    Ok(json!({ "outcome": outcome }))
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
    if p.profile
        .is_some_and(|asked| asked != orch.profile().canonical())
    {
        return Ok(ping(orch, &conn.lifetime));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line of `input` as `read_line_bounded` reads it, through a one-byte buffer (as
    /// well as whole).
    async fn lines(input: &[u8], max: usize) -> Vec<String> {
        let mut out = Vec::new();
        for capacity in [1, 64 * 1024] {
            let mut r = BufReader::with_capacity(capacity, input);
            let mut read = Vec::new();
            loop {
                match read_line_bounded(&mut r, max).await.unwrap() {
                    Line::Data(d) => read.push(String::from_utf8(d).unwrap()),
                    Line::TooLong(n) => read.push(format!("too long: {n}")),
                    Line::Eof => break,
                }
            }
            if capacity == 1 {
                out = read;
            } else {
                assert_eq!(out, read, "the same whatever the chunking");
            }
        }
        out
    }

    // Found by the socket_framing fuzz target: a refused line's length counted its `\n`, and a
    // last line without one could be one byte longer than the bound.
    #[tokio::test]
    async fn lines_are_bounded_and_refused_with_their_length() {
        assert_eq!(
            lines(b"0123\n01234\n012\n", 4).await,
            ["0123", "too long: 5", "012"]
        );
        assert_eq!(lines(b"a\n", 0).await, ["too long: 1"]);
        assert_eq!(lines(b"\n", 0).await, [""]);
        assert_eq!(lines(b"0123", 4).await, ["0123"]);
        assert_eq!(lines(b"01234", 4).await, ["too long: 5"]);
        assert_eq!(lines(b"0123\n01234", 4).await, ["0123", "too long: 5"]);
        assert_eq!(lines(b"012345678", 4).await, ["too long: 9"]);
    }

    #[tokio::test]
    async fn the_first_line_is_the_first_not_blank() {
        let mut r: &[u8] = b"\n \r\t\n{}\nnext\n";
        assert!(matches!(read_first_line(&mut r, 10).await.unwrap(), Line::Data(l) if l == b"{}"));
        let mut r: &[u8] = b"\n\n";
        assert!(matches!(
            read_first_line(&mut r, 10).await.unwrap(),
            Line::Eof
        ));
    }

    // Found by the socket_framing fuzz target: serde read a JSON array into a request by
    // position (`[1, "orch.ping"]` was a ping, `[null, "orch.mcp"]` opened an MCP session).
    #[test]
    fn a_request_is_an_object_not_an_array() {
        for line in [
            &br#"[1, "orch.ping"]"#[..],
            br#" [null, "orch.mcp", {}]"#,
            br#"[{"jsonrpc":"2.0","id":1,"method":"initialize"}]"#,
            b"[]",
        ] {
            assert_eq!(request_error(line), Some(codes::INVALID_REQUEST));
            assert_eq!(classify_first_line(Some(line)), FirstLine::Control);
        }
        assert_eq!(
            classify_first_line(Some(br#"{"id":1,"method":"orch.mcp"}"#)),
            FirstLine::McpPreamble
        );
        assert_eq!(
            classify_first_line(Some(br#"{"id":1,"method":"initialize"}"#)),
            FirstLine::Mcp
        );
        assert_eq!(
            classify_first_line(Some(br#"{"id":1,"method":"orch.ping"}"#)),
            FirstLine::Control
        );
        assert_eq!(classify_first_line(None), FirstLine::Control);
        assert_eq!(request_error(br#"{"method":"orch.ping"}"#), None);
        assert_eq!(request_error(b"5"), Some(codes::INVALID_REQUEST));
        assert_eq!(request_error(b"{"), Some(codes::PARSE_ERROR));
    }

    // Found by the socket_framing fuzz target: a line that is not UTF-8 (so not JSON) was
    // answered as an invalid request, or taken as one when the bad bytes were in a member
    // the request ignores.
    #[test]
    fn a_line_that_is_not_utf8_is_a_parse_error() {
        let ignored = b"{\"method\":\"initialize\",\"x\":\"\xff\"}";
        assert_eq!(request_error(ignored), Some(codes::PARSE_ERROR));
        assert_eq!(classify_first_line(Some(ignored)), FirstLine::Control);
        assert_eq!(request_error(b"{\"\xff\":1}"), Some(codes::PARSE_ERROR));
    }
}
