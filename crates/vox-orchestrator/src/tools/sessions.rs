//! `vox_session_*`: agent sessions with message logs.

use super::{HandlerEntry, bounded, typed};
use crate::orchestrator::{Ctx, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use vox_store::{SessionStatus, SessionStore};

fn sessions(ctx: &Ctx) -> Result<&dyn SessionStore, ToolError> {
    ctx.sessions
        .as_deref()
        .ok_or_else(|| ToolError::Unavailable("the sessions subsystem is not running".into()))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateArgs {
    /// A short title (default `untitled`).
    title: Option<String>,
    /// Any JSON object to keep with the session.
    metadata: Option<serde_json::Map<String, Value>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GetArgs {
    /// The session id (`s_…`).
    id: String,
    /// How many of the most recent messages to return (default 100, at most 1000).
    last: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    /// `open` or `closed`; both when absent.
    status: Option<StatusArg>,
    /// Most sessions (default 50, at most 500).
    limit: Option<u32>,
}

#[derive(Deserialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum StatusArg {
    Open,
    Closed,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AppendArgs {
    /// The session id.
    id: String,
    /// Who speaks: e.g. `user`, `assistant`, `tool`, `note`.
    role: String,
    /// The message text (at most 256 KiB).
    content: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CloseArgs {
    /// The session id.
    id: String,
    /// What the session achieved.
    summary: Option<String>,
}

fn create(ctx: &Ctx, a: CreateArgs) -> Result<Value, ToolError> {
    let title = a.title.unwrap_or_else(|| "untitled".into());
    bounded("title", &title, 512)?;
    let metadata = Value::Object(a.metadata.unwrap_or_default());
    if metadata.to_string().len() > 64 * 1024 {
        return Err(ToolError::InvalidArguments(
            "`metadata` is larger than 64 KiB".into(),
        ));
    }
    let s = sessions(ctx)?.create(&title, &metadata)?;
    Ok(json!({"session": s}))
}

fn get(ctx: &Ctx, a: GetArgs) -> Result<Value, ToolError> {
    let last = a.last.unwrap_or(100).min(1000) as usize;
    match sessions(ctx)?.get(&a.id, last)? {
        Some((session, messages)) => Ok(json!({"session": session, "messages": messages})),
        None => Err(ToolError::NotFound(format!("no session with id {}", a.id))),
    }
}

fn list(ctx: &Ctx, a: ListArgs) -> Result<Value, ToolError> {
    let limit = a.limit.unwrap_or(50).clamp(1, 500) as usize;
    let store = sessions(ctx)?;
    Ok(json!({"sessions": store.list(a.status.map(|s| match s {
        StatusArg::Open => SessionStatus::Open,
        StatusArg::Closed => SessionStatus::Closed,
    }), limit)?, "backend": store.backend()}))
}

fn append(ctx: &Ctx, a: AppendArgs) -> Result<Value, ToolError> {
    bounded("role", &a.role, 64)?;
    if a.content.len() > 256 * 1024 {
        return Err(ToolError::InvalidArguments(
            "`content` is larger than 256 KiB".into(),
        ));
    }
    let m = sessions(ctx)?.append(&a.id, &a.role, &a.content)?;
    Ok(json!({"appended": true, "id": a.id, "seq": m.seq}))
}

fn close(ctx: &Ctx, a: CloseArgs) -> Result<Value, ToolError> {
    if let Some(s) = &a.summary {
        bounded("summary", s, 64 * 1024)?;
    }
    let s = sessions(ctx)?.close(&a.id, a.summary.as_deref())?;
    Ok(json!({"session": s}))
}

pub fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![
        ("vox_session_create", typed(create)),
        ("vox_session_get", typed(get)),
        ("vox_session_list", typed(list)),
        ("vox_session_append", typed(append)),
        ("vox_session_close", typed(close)),
    ]
}
