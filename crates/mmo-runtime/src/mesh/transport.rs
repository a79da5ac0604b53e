//! The session socket's framing, as rmcp's transport: one JSON-RPC message per line, a line
//! longer than [`MAX_LINE`] refused without being kept. It is what the socket has always
//! carried, so the same bytes keep working:
//! - an MCP session (Codex's `mmo_mesh` through `codex-mmo mesh-stdio`, `codex-mmo agent-mcp`)
//!   starts with `initialize`, which rmcp answers;
//! - a one-shot request (the CLI's `tools/call` or `session/*`, on a connection of its own)
//!   starts with anything else: the transport opens the session for it (an `initialize` and
//!   `notifications/initialized` of its own, whose answer it keeps to itself);
//! - once the peer stops sending, the requests it is owed are still answered before the
//!   connection closes (rmcp alone would give in-flight handlers five seconds).

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ClientNotification, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use std::collections::{HashSet, VecDeque};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};
use tokio::sync::mpsc::UnboundedSender;

/// The longest request line the socket accepts.
pub const MAX_LINE: usize = 4 << 20;

/// The id of the `initialize` the transport sends for a one-shot request.
const ONE_SHOT_INITIALIZE: &str = "codex-mmo-one-shot-initialize";

/// Bounded line reading: a line longer than the limit is an error, not an allocation. A line
/// read in part is kept here, so a read that is dropped half-way loses nothing.
pub struct BoundedLines<R> {
    r: R,
    max: usize,
    buf: Vec<u8>,
}

impl<R: AsyncBufRead + Unpin> BoundedLines<R> {
    pub fn new(r: R, max: usize) -> Self {
        BoundedLines {
            r,
            max,
            buf: Vec::new(),
        }
    }

    /// The next line; `None` at the end; `Err` for an oversized or non-UTF-8 line.
    pub async fn next_line(&mut self) -> Option<Result<String, String>> {
        loop {
            let chunk = match self.r.fill_buf().await {
                Ok(c) => c,
                Err(e) => return Some(Err(e.to_string())),
            };
            if chunk.is_empty() {
                return if self.buf.is_empty() {
                    None
                } else {
                    Some(utf8(std::mem::take(&mut self.buf)))
                };
            }
            let (take, end) = match chunk.iter().position(|b| *b == b'\n') {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            self.buf.extend_from_slice(&chunk[..take]);
            self.r.consume(take);
            if self.buf.len() > self.max {
                self.buf = Vec::new();
                return Some(Err(format!("a line is longer than {} bytes", self.max)));
            }
            if end {
                let mut line = std::mem::take(&mut self.buf);
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Some(utf8(line));
            }
        }
    }
}

fn utf8(bytes: Vec<u8>) -> Result<String, String> {
    String::from_utf8(bytes).map_err(|_| "a line is not UTF-8".into())
}

/// A JSON-RPC error frame as the socket has always written it (`"id": null` when the request
/// had none, or could not be read).
fn error_line(id: Option<&Value>, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id.cloned().unwrap_or(Value::Null), "error": {"code": code, "message": message}})
        .to_string()
}

/// rmcp's transport over the socket's lines: messages in from `lines`, frames out to `out`
/// (a writer task owns the socket's write half).
pub struct LineTransport<R> {
    lines: BoundedLines<R>,
    out: UnboundedSender<String>,
    /// Messages to hand rmcp before reading more (a one-shot request's session opening).
    queued: VecDeque<ClientJsonRpcMessage>,
    started: bool,
    /// The peer sent its last line (or one that ended the connection).
    ended: bool,
    /// Requests of the peer not answered yet.
    owed: HashSet<RequestId>,
}

impl<R: AsyncBufRead + Unpin + Send> LineTransport<R> {
    pub fn new(read: R, out: UnboundedSender<String>) -> Self {
        LineTransport {
            lines: BoundedLines::new(read, MAX_LINE),
            out,
            queued: VecDeque::new(),
            started: false,
            ended: false,
            owed: HashSet::new(),
        }
    }

    /// The next message of the peer, or `None` once it has ended and is owed nothing.
    async fn next_message(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            if let Some(m) = self.queued.pop_front() {
                return Some(m);
            }
            if self.ended {
                if self.owed.is_empty() {
                    return None;
                }
                // The loop that drives this transport drops this future when an answer is
                // sent, and asks again.
                std::future::pending::<()>().await;
            }
            let line = match self.lines.next_line().await {
                None => {
                    self.ended = true;
                    continue;
                }
                Some(Err(why)) => {
                    let _ = self.out.send(error_line(None, -32600, &why));
                    self.ended = true;
                    continue;
                }
                Some(Ok(l)) if l.trim().is_empty() => continue,
                Some(Ok(l)) => l,
            };
            let value: Value = match serde_json::from_str(&line) {
                Ok(v) => v,
                Err(e) => {
                    let _ = self
                        .out
                        .send(error_line(None, -32700, &format!("not JSON: {e}")));
                    continue;
                }
            };
            let message = match serde_json::from_value::<ClientJsonRpcMessage>(value.clone()) {
                Ok(m) => m,
                Err(e) => {
                    let why = format!("not a JSON-RPC request or notification of MCP: {e}");
                    let _ = self.out.send(error_line(value.get("id"), -32600, &why));
                    continue;
                }
            };
            if !self.started {
                self.started = true;
                if !is_initialize(&message) {
                    self.queued.extend(one_shot_session());
                    self.queued.push_back(message);
                    continue;
                }
            }
            return Some(message);
        }
    }

    /// Keeps count of what the peer is owed.
    fn note(&mut self, m: &ClientJsonRpcMessage) {
        match m {
            JsonRpcMessage::Request(r) if !is_one_shot_initialize(&r.id) => {
                self.owed.insert(r.id.clone());
            }
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification
                    && let Some(id) = &c.params.request_id
                {
                    self.owed.remove(id);
                }
            }
            _ => {}
        }
    }
}

fn is_initialize(m: &ClientJsonRpcMessage) -> bool {
    matches!(m, JsonRpcMessage::Request(r) if r.request.method() == "initialize")
}

fn is_one_shot_initialize(id: &RequestId) -> bool {
    matches!(id, RequestId::String(s) if &**s == ONE_SHOT_INITIALIZE)
}

/// The session a one-shot request is served in: an `initialize` and `initialized` of its own.
fn one_shot_session() -> Vec<ClientJsonRpcMessage> {
    let initialize = json!({"jsonrpc": "2.0", "id": ONE_SHOT_INITIALIZE, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "codex-mmo", "version": crate::store::PACKAGE_VERSION},
    }});
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    [initialize, initialized]
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect()
}

impl<R: AsyncBufRead + Unpin + Send + 'static> Transport<RoleServer> for LineTransport<R> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answered = match &item {
            JsonRpcMessage::Response(r) => Some(&r.id),
            JsonRpcMessage::Error(e) => e.id.as_ref(),
            _ => None,
        };
        let sent = match answered {
            // The answer to the transport's own `initialize` is nobody's.
            Some(id) if is_one_shot_initialize(id) => Ok(()),
            _ => {
                if let Some(id) = answered {
                    self.owed.remove(id);
                }
                serde_json::to_string(&item)
                    .map_err(std::io::Error::other)
                    .and_then(|line| {
                        self.out
                            .send(line)
                            .map_err(|_| std::io::ErrorKind::BrokenPipe.into())
                    })
            }
        };
        std::future::ready(sent)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let m = self.next_message().await?;
        self.note(&m);
        Some(m)
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// A peer with no identity here: every request it sends is refused with `why`, and nothing
/// else is served.
pub async fn refuse<R: AsyncBufRead + Unpin>(read: R, out: UnboundedSender<String>, why: &str) {
    let mut lines = BoundedLines::new(read, MAX_LINE);
    while let Some(line) = lines.next_line().await {
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                let _ = out.send(error_line(None, -32600, &e));
                return;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(&line) {
            Ok(v) => {
                if let Some(id) = v.get("id") {
                    let _ = out.send(error_line(Some(id), -32001, &format!("refused: {why}")));
                }
            }
            Err(e) => {
                let _ = out.send(error_line(None, -32700, &format!("not JSON: {e}")));
            }
        }
    }
}

#[cfg(test)]
mod tests;
