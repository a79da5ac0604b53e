//! `/v1/ws`: our own JSON protocol over WebSocket (the token was checked at the upgrade).
//! `{id, type: "list_tools" | "call_tool", name?, args?}` →
//! `{id, type: "list_tools_result" | "call_tool_result" | "error", …}`.

use crate::{MAX_BODY_BYTES, Shared, Who};
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use serde_json::{Value, json};
use std::sync::Arc;
use vox_core::CallRun;

pub async fn upgrade(
    State(s): State<Arc<Shared>>,
    axum::Extension(who): axum::Extension<Who>,
    slot: Option<axum::Extension<crate::listen::ConnSlot>>,
    ws: WebSocketUpgrade,
) -> Response {
    ws.max_message_size(MAX_BODY_BYTES)
        .on_upgrade(move |socket| async move {
            // The session holds its connection's place under the gateway's limit until it ends.
            let _slot = slot;
            session(socket, s, who).await;
        })
}

async fn session(mut socket: WebSocket, s: Arc<Shared>, mut who: Who) {
    // Each connection is its own session.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    who.session = format!(
        "ws:{}:{}",
        who.agent,
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    who.session_named = true;
    serve_session(&mut socket, &s, &who).await;
    s.orch.end_session(&who.session);
}

/// Most messages held while a call runs (they are answered in order after it).
const MAX_QUEUED: usize = 32;

async fn serve_session(socket: &mut WebSocket, s: &Shared, who: &Who) {
    // Messages that arrived while a call ran, answered in order after it.
    let mut queued = std::collections::VecDeque::new();
    loop {
        let msg = match queued.pop_front() {
            Some(m) => m,
            None => match socket.recv().await {
                Some(Ok(m)) => m,
                _ => return,
            },
        };
        let reply = match msg {
            // Each message is a request: the caller's rate limit holds here as on REST.
            Message::Text(_) if s.limiter.check_key(&who.agent).is_err() => {
                json!({"id": null, "type": "error", "status": 429, "error": {"code": "rate_limited", "message": "too many messages; slow down"}})
            }
            Message::Text(text) => {
                let run = CallRun::default();
                let cancel = run.cancel.clone();
                let answer = answer(s, who, text.as_str(), run);
                tokio::pin!(answer);
                // Keep reading while the call runs: a closed connection cancels its work.
                loop {
                    tokio::select! {
                        r = &mut answer => break r,
                        m = socket.recv() => match m {
                            Some(Ok(Message::Close(_)) | Err(_)) | None => {
                                cancel.cancel();
                                return;
                            }
                            // Reading on is only to notice a close: a client that keeps
                            // sending meanwhile is cut off rather than buffered without end.
                            Some(Ok(_)) if queued.len() >= MAX_QUEUED => {
                                cancel.cancel();
                                let _ = socket
                                    .send(Message::Close(Some(axum::extract::ws::CloseFrame {
                                        code: 1008,
                                        reason: "too many messages while a call runs".into(),
                                    })))
                                    .await;
                                return;
                            }
                            Some(Ok(other)) => queued.push_back(other),
                        },
                    }
                }
            }
            Message::Binary(_) => {
                json!({"id": null, "type": "error", "error": {"code": "invalid_request", "message": "send JSON text frames"}})
            }
            Message::Close(_) => break,
            _ => continue,
        };
        if socket
            .send(Message::Text(reply.to_string().into()))
            .await
            .is_err()
        {
            break;
        }
    }
}

/// Whether a request's `id` comes back exactly as sent: null, a bounded string, or an integer
/// that fits 64 bits (a larger one parses as a float and would be echoed rounded).
fn valid_id(id: &Value) -> bool {
    match id {
        Value::Null => true,
        Value::String(s) => s.len() <= 256,
        Value::Number(n) => n.is_i64() || n.is_u64(),
        _ => false,
    }
}

/// A `/v1/ws` text message, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum WsRequest {
    /// `{"type": "list_tools"}`.
    ListTools {
        /// The request's `id` (`null` when absent), echoed in the answer.
        id: Value,
    },
    /// `{"type": "call_tool", "name": <string>, "args"?: <any>}`.
    CallTool {
        /// The request's `id` (`null` when absent), echoed in the answer.
        id: Value,
        /// The tool's name.
        name: String,
        /// Its arguments (`null` when absent).
        args: Value,
    },
}

fn ws_error(id: Value, message: impl Into<String>) -> Value {
    json!({"id": id, "type": "error", "status": 400, "error": {"code": "invalid_request", "message": message.into()}})
}

/// Parses a `/v1/ws` text message, or gives the `error` answer (status 400,
/// `invalid_request`) to send back: not JSON, an `id` that would not come back as sent, an
/// unknown `type`, or `call_tool` without a string `name`.
pub fn parse_ws_request(text: &str) -> Result<WsRequest, Value> {
    let req: Value =
        serde_json::from_str(text).map_err(|e| ws_error(Value::Null, format!("not JSON: {e}")))?;
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    if !valid_id(&id) {
        return Err(ws_error(
            Value::Null,
            "`id` must be a string of at most 256 bytes or an integer within 64 bits (a longer number would come back rounded)",
        ));
    }
    match req.get("type").and_then(Value::as_str) {
        Some("list_tools") => Ok(WsRequest::ListTools { id }),
        Some("call_tool") => {
            let Some(name) = req.get("name").and_then(Value::as_str) else {
                return Err(ws_error(id, "call_tool needs a string `name`"));
            };
            let name = name.to_owned();
            let args = req.get("args").cloned().unwrap_or(Value::Null);
            Ok(WsRequest::CallTool { id, name, args })
        }
        _ => Err(ws_error(id, "type must be list_tools or call_tool")),
    }
}

async fn answer(s: &Shared, who: &Who, text: &str, run: CallRun) -> Value {
    match parse_ws_request(text) {
        Err(reply) => reply,
        Ok(WsRequest::ListTools { id }) => {
            json!({"id": id, "type": "list_tools_result", "tools": s.orch.list(&s.scope(who, false))})
        }
        Ok(WsRequest::CallTool { id, name, args }) => vox_mcp::encode::ws(
            id,
            s.orch.call(&s.scope(who, false), &name, args, run).await,
        ),
    }
}
