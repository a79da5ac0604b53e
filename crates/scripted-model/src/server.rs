//! The HTTP side: the three provider APIs (Responses, Chat Completions, Anthropic Messages), a
//! request log, streamed answers.

use crate::script::Engine;
use crate::sse::{Chunk, anthropic_chunks, chat_chunks, chunks};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Request bodies larger than this are refused (413).
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// The server state: the engine behind a lock, a request counter and the request log.
pub struct Model {
    engine: Mutex<Engine>,
    seq: AtomicU64,
    log: Option<Mutex<std::fs::File>>,
}

impl Model {
    /// A model answering from `engine`, logging one JSON line per request to `log` when given.
    pub fn new(engine: Engine, log: Option<std::fs::File>) -> Arc<Self> {
        Arc::new(Model {
            engine: Mutex::new(engine),
            seq: AtomicU64::new(0),
            log: log.map(Mutex::new),
        })
    }

    fn log(&self, line: &Value) {
        if let Some(f) = &self.log {
            let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
            // One write of the whole line, so that a reader sees whole lines.
            let _ = f.write_all(format!("{line}\n").as_bytes());
            let _ = f.flush();
        }
    }
}

/// Which provider API a request came in on.
#[derive(Clone, Copy)]
enum Api {
    Responses,
    Chat,
    Anthropic,
}

/// The HTTP routes of the three provider APIs (with and without `/v1`); anything else is 404.
pub fn router(model: Arc<Model>) -> Router {
    Router::new()
        .route("/v1/responses", post(responses))
        .route("/responses", post(responses))
        .route("/v1/chat/completions", post(chat))
        .route("/chat/completions", post(chat))
        .route("/v1/messages", post(messages))
        .route("/messages", post(messages))
        .fallback(other)
        .with_state(model)
}

async fn responses(state: State<Arc<Model>>, request: Request) -> Response {
    answer(state, request, Api::Responses).await
}

async fn chat(state: State<Arc<Model>>, request: Request) -> Response {
    answer(state, request, Api::Chat).await
}

async fn messages(state: State<Arc<Model>>, request: Request) -> Response {
    answer(state, request, Api::Anthropic).await
}

async fn other(State(m): State<Arc<Model>>, method: Method, uri: Uri) -> Response {
    let seq = m.seq.fetch_add(1, Ordering::SeqCst) + 1;
    m.log(&json!({"seq": seq, "method": method.as_str(), "path": uri.path(), "status": 404}));
    (
        StatusCode::NOT_FOUND,
        "scripted-model serves POST /v1/responses, /v1/chat/completions and /v1/messages\n",
    )
        .into_response()
}

async fn answer(State(m): State<Arc<Model>>, request: Request, api: Api) -> Response {
    let seq = m.seq.fetch_add(1, Ordering::SeqCst) + 1;
    let path = request.uri().path().to_owned();
    let headers = request.headers();
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        m.log(&json!({"seq": seq, "path": path, "status": 413, "content_length": declared}));
        return (StatusCode::PAYLOAD_TOO_LARGE, "the body is too large\n").into_response();
    }
    if let Some(enc) = headers.get(header::CONTENT_ENCODING)
        && enc.as_bytes() != b"identity"
    {
        let enc = String::from_utf8_lossy(enc.as_bytes()).into_owned();
        m.log(&json!({"seq": seq, "path": path, "status": 415, "content_encoding": enc}));
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "compressed bodies are not supported\n",
        )
            .into_response();
    }
    let body = match axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(e) => {
            m.log(&json!({"seq": seq, "path": path, "status": 413, "error": e.to_string()}));
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                "the body is too large or broken\n",
            )
                .into_response();
        }
    };
    let parsed: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) | Err(_) => {
            let text = String::from_utf8_lossy(&body[..body.len().min(2000)]).into_owned();
            m.log(&json!({"seq": seq, "path": path, "status": 400, "body_text": text}));
            return (StatusCode::BAD_REQUEST, "the body is not a JSON object\n").into_response();
        }
    };
    let plan = m
        .engine
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .plan(&parsed);
    let model = parsed
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("scripted")
        .to_owned();
    let mut line = plan.log_json();
    line["seq"] = json!(seq);
    line["path"] = json!(path);
    line["body"] = parsed;
    m.log(&line);

    if let Some(code) = plan.status {
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = json!({"error": {"type": "scripted_status", "message": format!("scripted-model answers {code}")}});
        return (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response();
    }
    let queue: VecDeque<Chunk> = match api {
        Api::Responses => chunks(&plan, seq, &model),
        Api::Chat => chat_chunks(&plan, seq, &model),
        Api::Anthropic => anthropic_chunks(&plan, seq, &model),
    }
    .into();
    let stream = futures_util::stream::unfold(queue, |mut q| async move {
        loop {
            match q.pop_front()? {
                Chunk::Event(s) => return Some((Ok::<_, std::convert::Infallible>(s), q)),
                Chunk::Delay(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                Chunk::Hang => std::future::pending::<()>().await,
            }
        }
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
